package parser

import (
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// notWithConcurrency are the names a concurrency line does not take: they
// describe a limit per period.
var notWithConcurrency = []string{"period", "threshold", "algorithm", "burst", "capacity", "prefetch"}

// checkConcurrency checks a concurrency line (concurrency=), and lease=
// on a line without it, and reports whether the line is a concurrency
// line (checked then).
func (p *lineParser) checkConcurrency() bool {
	pos, ok := p.first["concurrency"]
	if !ok && !p.mentioned["concurrency"] {
		if lease, ok := p.first["lease"]; ok {
			p.errs.Add(lease, "lease needs concurrency=: it is how long a slot of a concurrency limit stays taken")
		}
		return false
	}
	for _, name := range notWithConcurrency {
		if at, ok := p.first[name]; ok {
			p.errs.Add(at, "%s= does not go with concurrency=: a concurrency line limits the calls in flight, not the calls per period (write the rate limit on a line of its own)", name)
		}
	}
	if at, ok := p.first["cooldown"]; ok && p.d.Cooldown {
		p.errs.Add(at, "cooldown does not go with concurrency=: a slot is held while a call runs, so no upstream's retry time can cool it; put cooldown=true on one of the method's rate lines")
	}
	if err := limitfacts.CheckConcurrency(p.d.Concurrency, p.d.Lease); err != nil && p.d.Concurrency > 0 {
		p.errs.Add(pos, "%v", err)
	}
	return true
}
