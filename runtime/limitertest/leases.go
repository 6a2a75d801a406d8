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
// line per user (all or nothing), the same with the leased line second
// (its state under its own key and index), a leased line that counts
// calls (Limit.PerCall) beside an exact line that takes the cost, and a
// leased line beside a shared line (Rule.Shared) that another rule's
// calls take too; fixed_window adds a calendar day.
var leaseCases = []string{"one_line", "keys_per_line", "second_line", "per_call", "shared_line"}

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
	if cross == "second_line" {
		r.Limits = []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 15}, lim}
		r.KeyExprs = []string{"user", ""}
	}
	if cross == "per_call" { // the lease holds calls, whatever their cost
		calls := lim
		calls.PerCall = true
		r.Limits = []ratelimit.Limit{calls, {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 80 * cost}}
	}
	var other *ratelimit.Rule // a rule sharing r's line 1, its calls not leased
	if cross == "shared_line" {
		need(t, "decide shared lines (ratelimit.Abilities.SharesLines)", s.caps.shared)
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
				req.Key, req.Keys = "", []string{"", ""}
				for j, expr := range r.KeyExprs {
					if expr != "" {
						req.Keys[j] = user
					}
				}
			}
			if other != nil && rnd.IntN(4) == 0 {
				req = ratelimit.Request{Name: other.Name, Cost: cost, Limits: other.Limits, Keys: []string{user}, Shared: other.Shared}
			}
			asked = append(asked, admitted{at: e.clock.Now(), req: req, step: i})
			p := procs[rnd.IntN(len(procs))]
			held := heldBy(p, &req)
			d, err := p.Allow(e.ctx, req)
			e.check(err == nil, "call %d: %v", i, err)
			if d.Allowed {
				got = append(got, admitted{at: e.clock.Now(), req: req, step: i})
			}
			// All or nothing: a call its lease can serve takes its units
			// from the lease when admitted, and none when another line
			// denies it.
			if idx := leasedIndex(req.Limits); idx >= 0 && held >= req.UnitsOf(idx) {
				want := held
				if d.Allowed {
					want -= req.UnitsOf(idx)
				}
				now := heldBy(p, &req)
				e.check(d.Allowed || d.LimitIndex != idx, "call %d: the leased line %d, holding %d units in a lease, denied a call of %d: %+v", i, idx, held, req.UnitsOf(idx), d)
				e.check(now == want, "call %d (%+v): the lease held %d units, then %d, want %d", i, d, held, now, want)
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

// leasedIndex returns the index of the leased line of limits (the first
// with a Prefetch), or -1.
func leasedIndex(limits []ratelimit.Limit) int {
	for i, l := range limits {
		if l.Prefetch > 0 {
			return i
		}
	}
	return -1
}

// heldBy returns the units p holds unused in the lease of req's leased
// line (see guard.Leases.Held); 0 when it has none.
func heldBy(p *guard.Leases, req *ratelimit.Request) int64 {
	idx := leasedIndex(req.Limits)
	if idx < 0 {
		return 0
	}
	name, _ := req.Line(idx)
	key := req.Key
	if req.Keys != nil {
		key = req.Keys[idx]
	}
	return p.Held(name, key)
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

// leasePeek runs leases/peek: calls of three rules, a leased line alone, a
// leased line then an exact line per user, and an exact line per user
// then a leased line, on the suite's clock, each asked of ratelimit.Peek
// first, which must tell what Allow then decides: admitted or denied, by
// the same limit, with the same source (a deny cache's repeat counting
// as the backend's), Remaining (Peek's is before the call) and, when
// denied, RetryAfter. The calls are those of the backend's own lease
// guard (found with guard.Of, such as redislimit.Limiter's), or else of
// leaseProcesses lease guards over the backend, each a process.
func (s *suite) leasePeek(t *testing.T, alg ratelimit.Algorithm, cost int64) {
	need(t, "settle reservations", s.caps.reserve)
	need(t, "peek (ratelimit.Peek)", s.caps.peek)
	if !s.b.Clock {
		t.Skip("the backend does not read ratelimit.WithClock's clock: Peek and Allow must see one time")
	}
	lim := ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: 60, Prefetch: 100 * time.Millisecond}
	user := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 25}
	rules := []*ratelimit.Rule{
		{Name: "leases/peek/alone", Limits: []ratelimit.Limit{lim}},
		{Name: "leases/peek/first", Limits: []ratelimit.Limit{lim, user}, KeyExprs: []string{"", "user"}},
		{Name: "leases/peek/second", Limits: []ratelimit.Limit{user, lim}, KeyExprs: []string{"user", ""}},
	}
	s.run(t, func(e *env) {
		rnd := rng(t)
		// A guard over the backend's own would take leases of leases, and
		// a Peek that ends the inner one's would change what the outer's
		// lease is then charged against.
		var procs []ratelimit.Limiter
		var guards []*guard.Leases
		if own, ok := guard.Of[*guard.Leases](e.got); ok {
			procs, guards = []ratelimit.Limiter{e.got}, []*guard.Leases{own}
		} else {
			for range leaseProcesses {
				g := guard.NewLeases(e.got)
				procs, guards = append(procs, g), append(guards, g)
			}
		}
		var leased, denied int
		for i := range 900 {
			e.step = i
			e.advance(time.Duration(rnd.Int64N(int64(lim.Period / 100))))
			for _, g := range guards {
				g.EndExpired()
			}
			r := rules[rnd.IntN(len(rules))]
			u := []string{"ann", "bob", "cid"}[rnd.IntN(3)]
			req := ratelimit.Request{Name: r.Name, Cost: cost, Limits: r.Limits}
			if r.KeyExprs != nil {
				req.Keys = []string{"", ""}
				for j, expr := range r.KeyExprs {
					if expr != "" {
						req.Keys[j] = u
					}
				}
			}
			p := procs[rnd.IntN(len(procs))]
			peek, err := ratelimit.Peek(e.ctx, p, req)
			e.check(err == nil, "call %d: Peek: %v", i, err)
			got, err := p.Allow(e.ctx, req)
			e.check(err == nil, "call %d: Allow: %v", i, err)
			want := got
			if got.Allowed {
				want.Remaining += req.UnitsOf(got.LimitIndex)
			}
			if peek.Source == ratelimit.SourceCache {
				peek.Source = ratelimit.SourceBackend // a repeat of the backend's denial
			}
			if want.Source == ratelimit.SourceCache {
				want.Source = ratelimit.SourceBackend
			}
			e.check(peek.Allowed == want.Allowed && peek.LimitIndex == want.LimitIndex && peek.Source == want.Source && peek.Remaining == want.Remaining &&
				(peek.Allowed || peek.RetryAfter == want.RetryAfter),
				"call %d of %s: Peek told %+v, Allow decided %+v", i, r.Name, peek, got)
			if got.Source == ratelimit.SourceLease {
				leased++
			}
			if !got.Allowed {
				denied++
			}
		}
		for _, g := range guards {
			g.Close()
		}
		e.check(leased > 0 && denied > 0, "%d calls answered from leases, %d denied: the calls never met both", leased, denied)
		t.Logf("%d calls answered from leases, %d denied", leased, denied)
	})
}

// leaseDeath runs leases/dead_process: a process (a lease guard over the
// backend) admits calls of a leased line of 1,000 units a second, one a
// millisecond, some from a lease it took before, then dies: its lease
// never ends (nothing gives back or settles it). Another process then
// asks for the line exactly, as many calls as the backend admits each
// millisecond, for two periods: the oracle must find no window holding
// more than the limit, the dead process's calls counting where their own
// charges would have (a sliding log's lease charge must weigh until a
// period after its last call, not after the time it was charged).
func (s *suite) leaseDeath(t *testing.T, alg ratelimit.Algorithm, cost int64) {
	need(t, "settle reservations", s.caps.reserve)
	if !s.b.Clock {
		t.Skip("the backend does not read ratelimit.WithClock's clock: the oracle replays calls at their times")
	}
	lim := ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: 1000, Prefetch: 100 * time.Millisecond}
	req := ratelimit.Request{Name: "leases/dead", Cost: cost, Limits: []ratelimit.Limit{lim}}
	s.run(t, func(e *env) {
		dead := guard.NewLeases(e.got) // never closed: it dies
		var got []admitted
		died := false
		for i := 0; !died; i++ {
			e.step = i
			e.check(i < 1000, "the process never admitted a call from a lease it took before")
			taken, _ := dead.Stats()
			d, err := dead.Allow(e.ctx, req)
			e.check(err == nil, "call %d: %v", i, err)
			if d.Allowed {
				got = append(got, admitted{at: e.clock.Now(), req: req, step: i})
			}
			now, _ := dead.Stats()
			died = i >= 20 && d.Source == ratelimit.SourceLease && now == taken
			e.advance(time.Millisecond)
		}
		exact := exactOf(req)
		for i := range 2000 {
			e.step = 10_000 + i
			for n := 0; ; n++ {
				e.check(n <= 1000, "step %d: more than the limit in a millisecond", i)
				d, err := e.got.Allow(e.ctx, exact)
				e.check(err == nil, "step %d: %v", i, err)
				if !d.Allowed {
					break
				}
				got = append(got, admitted{at: e.clock.Now(), req: exact, step: e.step})
			}
			e.advance(time.Millisecond)
		}
		bad := replay(e, got)
		e.check(bad < 0, "the oracle denies admitted call %d (of %d admitted)", bad, len(got))
		_, served := dead.Stats()
		t.Logf("the dead process admitted %d calls from leases; %d admitted in all", served, len(got))
	})
}
