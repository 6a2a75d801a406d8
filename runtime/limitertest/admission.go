package limitertest

import (
	"fmt"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// withAdmission: the calls of a sequence, made by Rule.Check with a
// context from ratelimit.WithAdmission, one of one key, one of a key per
// limit and one of a limit that counts calls beside one that takes their
// cost (ratelimit.Limit.PerCall) or, every other time on a backend that
// decides shared lines, one of a rule with a shared line in turn, record the same
// Admission on both limiters (the limits a call of a key per limit was
// decided against included), and the record keeps the admission with the
// fewest units remaining.
func (s *suite) withAdmission(t *testing.T, alg ratelimit.Algorithm) {
	s.needClock(t)
	const period = 20 * time.Millisecond
	one := &ratelimit.Rule{Name: "admission", Limits: []ratelimit.Limit{limit(alg, period)}}
	lines := &ratelimit.Rule{
		Name:     "admission/lines",
		Limits:   []ratelimit.Limit{limit(alg, period), {Algorithm: ratelimit.SlidingLog, Period: 2 * period, Threshold: 12}},
		KeyExprs: []string{"user", ""},
	}
	perCall := &ratelimit.Rule{Name: "admission/per_call", Limits: perCallLimits(alg, period)}
	var shared *ratelimit.Rule
	if s.caps.shared == "" {
		shared, _, _ = sharedRules(alg, period)
	}
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for i := range calls {
			e.advance(step(rng, period))
			r, keys := one, []string{keys[rng.IntN(2)]}
			switch {
			case i%3 == 1:
				r, keys = lines, append(keys, "")
			case i%3 == 2 && (shared == nil || i%2 == 0):
				r = perCall
			case i%3 == 2:
				r, keys = shared, append(keys, "")
			}
			var gotLimits, wantLimits string
			o := e.same(fmt.Sprintf("%s Check(keys %q) with an admission record", r.Name, keys), func(l ratelimit.Limiter, twin bool) outcome {
				ctx, admission := ratelimit.WithAdmission(e.ctx)
				err := r.Check(ctx, l, 2, keys...)
				a := admission()
				if err != nil && a.Decided {
					e.fatalf("%s: a call that failed (%v) recorded an admission: %+v", r.Name, err, a)
				}
				recorded := fmt.Sprint(a.Limits, a.KeyExprs)
				if twin {
					wantLimits = recorded
				} else {
					gotLimits = recorded
				}
				return outcomeOf(a, err)
			})
			e.check(!e.differential() || gotLimits == wantLimits, "%s: the admission's limits:\n backend %s\n    twin %s", r.Name, gotLimits, wantLimits)
			e.check(o.Err != "" || o.Decided, "%s: an admitted call recorded no admission: %+v", r.Name, o)
			c.add(o)
		}
		e.both(c)
	})
}
