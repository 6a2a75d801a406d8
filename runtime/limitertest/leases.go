package limitertest

import (
	"slices"
	"testing"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// leaseCases are the crosses of leases (Limit.Prefetch, guard.Leases): a
// leased line alone, a leased line of every call as one beside an exact
// line per user (all or nothing), and a leased line that counts calls
// (Limit.PerCall) beside an exact line that takes the cost, and a leased
// line beside a shared line (Rule.Shared) that another rule's calls take
// too; fixed_window adds a calendar day.
var leaseCases = []string{"one_line", "keys_per_line", "per_call", "shared_line"}

// leaseProcesses is how many processes (lease guards) share the backend.
const leaseProcesses = 3

// admitted is one call admitted, as the oracle replays it.
type admitted struct {
	at   time.Time
	req  ratelimit.Request
	step int
}

// leases runs the cross: leaseProcesses lease guards over one limiter of
// the backend, each a process, make calls that fill the limit several
// times on the suite's clock; then an oracle replays every admitted call
// at its time on a fresh in-process limiter without leases, which must
// admit every one (no window or interval holds more than the limit), and
// the leases must have served calls and admitted at least 70% of what
// the limiter alone admits of the same calls.
func (s *suite) leases(t *testing.T, alg ratelimit.Algorithm, cross string, cost int64) {
	need(t, "settle reservations", s.caps.reserve)
	if !s.b.Clock {
		t.Skip("the backend does not read ratelimit.WithClock's clock: the oracle replays calls at their times")
	}
	lim := ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: 60, Prefetch: 100 * time.Millisecond}
	if alg == ratelimit.FixedWindow && cross == "calendar" {
		lim = ratelimit.Limit{Calendar: "day", TZ: "Europe/Paris", Threshold: 200, Prefetch: 100 * time.Millisecond}
	}
	r := &ratelimit.Rule{Name: "leases", Limits: []ratelimit.Limit{lim}}
	if cross == "keys_per_line" {
		r.Limits = []ratelimit.Limit{lim, {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 15}}
		r.KeyExprs = []string{"", "user"}
	}
	if cross == "per_call" { // the lease holds calls, whatever their cost
		calls := lim
		calls.PerCall = true
		r.Limits = []ratelimit.Limit{calls, {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 80 * cost}}
	}
	var other *ratelimit.Rule // a rule sharing r's line 1, its calls not leased
	if cross == "shared_line" {
		need(t, "decide shared lines (ratelimit.LineSharer)", s.caps.shared)
		line := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 15}
		r.Limits, r.KeyExprs, r.Shared = []ratelimit.Limit{lim, line}, []string{"", "user"}, []string{"", "leases/line"}
		other = &ratelimit.Rule{Name: "leases/other", Limits: []ratelimit.Limit{line}, KeyExprs: []string{"user"}, Shared: []string{"leases/line"}}
	}
	step := lim.Period / 100
	if lim.Calendar != "" {
		step = time.Millisecond
	}
	s.run(t, func(e *env) {
		if lim.Calendar != "" { // the calls cross midnight in Paris
			e.advance(time.Date(2100, 3, 1, 22, 59, 59, 700_000_000, time.UTC).Sub(e.clock.Now()))
		}
		rnd := rng(t)
		procs := make([]*guard.Leases, leaseProcesses)
		for i := range procs {
			procs[i] = guard.NewLeases(e.got)
		}
		var got []admitted
		var asked []admitted
		for i := range 1200 {
			e.step = i
			e.advance(time.Duration(rnd.Int64N(int64(step))))
			for _, p := range procs {
				p.EndExpired() // as the timers of processes on this clock would
			}
			user := []string{"ann", "bob", "cid"}[rnd.IntN(3)]
			req := ratelimit.Request{Name: r.Name, Key: user, Cost: cost, Limits: r.Limits, Shared: r.Shared}
			if r.KeyExprs != nil {
				req.Key, req.Keys = "", []string{"", user}
			}
			if other != nil && rnd.IntN(4) == 0 {
				req = ratelimit.Request{Name: other.Name, Cost: cost, Limits: other.Limits, Keys: []string{user}, Shared: other.Shared}
			}
			asked = append(asked, admitted{at: e.clock.Now(), req: req, step: i})
			d, err := procs[rnd.IntN(len(procs))].Allow(e.ctx, req)
			e.check(err == nil, "call %d: %v", i, err)
			if d.Allowed {
				got = append(got, admitted{at: e.clock.Now(), req: req, step: i})
			}
		}
		var served int64
		for _, p := range procs {
			p.Close()
			_, n := p.Stats()
			served += n
		}
		bad := replay(e, got)
		e.check(bad < 0, "the oracle denies admitted call %d (of %d admitted)", bad, len(got))
		exact := countAdmitted(e, asked) // the limit alone: what it admits of the calls asked
		e.check(served > 0, "no call was admitted from a lease")
		e.check(len(got)*10 >= exact*7, "leases admitted %d calls, the limit alone %d", len(got), exact)
		t.Logf("admitted %d (%d from leases), the limit alone %d", len(got), served, exact)
	})
}

// replay decides calls, in time order, on a fresh in-process limiter
// without leases on a clock of its own, and returns the step of the first
// it denies, or -1.
func replay(e *env, calls []admitted) int {
	m, clock := oracle()
	for _, c := range sorted(calls) {
		clock.Set(c.at)
		if d, err := m.Allow(e.ctx, exactOf(c.req)); err != nil || !d.Allowed {
			return c.step
		}
	}
	return -1
}

// countAdmitted returns how many of calls an in-process limiter without
// leases admits, made in time order.
func countAdmitted(e *env, calls []admitted) int {
	m, clock := oracle()
	n := 0
	for _, c := range sorted(calls) {
		clock.Set(c.at)
		if d, err := m.Allow(e.ctx, exactOf(c.req)); err == nil && d.Allowed {
			n++
		}
	}
	return n
}

// oracle returns an in-process limiter on a clock of its own.
func oracle() (*ratelimit.MemoryLimiter, *clocktest.Manual) {
	clock := clocktest.NewManual()
	return ratelimit.NewMemory(ratelimit.WithClock(clock)), clock
}

// sorted returns calls in time order, those of one time in their order.
func sorted(calls []admitted) []admitted {
	out := slices.Clone(calls)
	slices.SortStableFunc(out, func(a, b admitted) int { return a.at.Compare(b.at) })
	return out
}

// exactOf returns req with limits that lease nothing.
func exactOf(req ratelimit.Request) ratelimit.Request {
	req.Limits = slices.Clone(req.Limits)
	for i := range req.Limits {
		req.Limits[i].Prefetch = 0
	}
	return req
}
