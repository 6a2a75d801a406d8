package limitertest

import (
	"math/rand/v2"
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
	lim := leaseLimit(alg, cross)
	r, other := s.leaseRules(t, lim, cross, cost)
	step := lim.Period / 100
	if lim.Calendar != "" {
		step = time.Millisecond
	}
	s.run(t, func(e *env) {
		if lim.Calendar != "" { // the calls cross midnight in Paris
			e.advance(time.Date(2100, 3, 1, 22, 59, 59, 700_000_000, time.UTC).Sub(e.clock.Now()))
		}
		rnd := rng(t)
		procs := newLeaseGuards(e.got, leaseProcesses)
		var got, asked []admitted
		for i := range 1200 {
			e.step = i
			e.advance(time.Duration(rnd.Int64N(int64(step))))
			endExpired(procs) // as the timers of processes on this clock would
			req := leaseRequest(rnd, r, other, cost)
			asked = append(asked, admitted{at: e.clock.Now(), req: req, step: i})
			if leaseCall(e, procs[rnd.IntN(len(procs))], req, i) {
				got = append(got, admitted{at: e.clock.Now(), req: req, step: i})
			}
		}
		served := closeLeases(procs)
		checkLeaseOutcome(t, e, got, asked, served)
	})
}

// leaseLimit returns the leased line of a leases cross: 60 units a second
// of alg, leased 100ms at a time, or for fixed_window's calendar cross
// 200 units a day in Paris.
func leaseLimit(alg ratelimit.Algorithm, cross string) ratelimit.Limit {
	if factsOf(alg).Calendar && cross == "calendar" {
		return ratelimit.Limit{Calendar: "day", TZ: "Europe/Paris", Threshold: 200, Prefetch: 100 * time.Millisecond}
	}
	return ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: 60, Prefetch: 100 * time.Millisecond}
}

// leaseRules returns the rule of a leases cross, whose leased line is lim
// beside the cross's other lines (see leaseCases), and for shared_line
// the rule whose calls, not leased, share its exact line (else nil). It
// skips shared_line when the backend cannot decide shared lines.
func (s *suite) leaseRules(t *testing.T, lim ratelimit.Limit, cross string, cost int64) (r, other *ratelimit.Rule) {
	r = &ratelimit.Rule{Name: "leases", Limits: []ratelimit.Limit{lim}}
	exact := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 15}
	switch cross {
	case "keys_per_line":
		r.Limits, r.KeyExprs = []ratelimit.Limit{lim, exact}, []string{"", "user"}
	case "second_line":
		r.Limits, r.KeyExprs = []ratelimit.Limit{exact, lim}, []string{"user", ""}
	case "per_call": // the lease holds calls, whatever their cost
		calls := lim
		calls.PerCall = true
		r.Limits = []ratelimit.Limit{calls, {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 80 * cost}}
	case "shared_line":
		need(t, "decide shared lines (ratelimit.Abilities.SharesLines)", s.caps.shared)
		r.Limits, r.KeyExprs, r.Shared = []ratelimit.Limit{lim, exact}, []string{"", "user"}, []string{"", "leases/line"}
		other = &ratelimit.Rule{Name: "leases/other", Limits: []ratelimit.Limit{exact}, KeyExprs: []string{"user"}, Shared: []string{"leases/line"}}
	}
	return r, other
}

// leaseRequest returns the next call of a leases run: a call of r by a
// random user, or, one time in four when other is not nil, a call of
// other by that user.
func leaseRequest(rnd *rand.Rand, r, other *ratelimit.Rule, cost int64) ratelimit.Request {
	user := []string{"ann", "bob", "cid"}[rnd.IntN(3)]
	req := ratelimit.Request{Name: r.Name, Key: user, Cost: cost, Limits: r.Limits, Shared: r.Shared}
	if r.KeyExprs != nil {
		req.Key, req.Keys = "", keysFor(r.KeyExprs, user)
	}
	if other != nil && rnd.IntN(4) == 0 {
		req = ratelimit.Request{Name: other.Name, Cost: cost, Limits: other.Limits, Keys: []string{user}, Shared: other.Shared}
	}
	return req
}

// keysFor returns the keys of a call by user of a rule of key expressions
// exprs: user for each line keyed by an expression, "" for the others.
func keysFor(exprs []string, user string) []string {
	keys := make([]string, len(exprs))
	for j, expr := range exprs {
		if expr != "" {
			keys[j] = user
		}
	}
	return keys
}

// leaseCall asks the process p to allow req, call i of the run, and
// reports whether it was admitted. All or nothing: a call its lease can
// serve takes its units from the lease when admitted, and none when
// another line denies it; the leased line never denies it.
func leaseCall(e *env, p *guard.Leases, req ratelimit.Request, i int) bool {
	held := heldBy(p, &req)
	d, err := p.Allow(e.ctx, req)
	e.check(err == nil, "call %d: %v", i, err)
	if idx := leasedIndex(req.Limits); idx >= 0 && held >= req.UnitsOf(idx) {
		want := held
		if d.Allowed {
			want -= req.UnitsOf(idx)
		}
		now := heldBy(p, &req)
		e.check(d.Allowed || d.LimitIndex != idx, "call %d: the leased line %d, holding %d units in a lease, denied a call of %d: %+v", i, idx, held, req.UnitsOf(idx), d)
		e.check(now == want, "call %d (%+v): the lease held %d units, then %d, want %d", i, d, held, now, want)
	}
	return d.Allowed
}

// checkLeaseOutcome checks a leases run's calls: the oracle admits every
// call admitted (got), some were served from leases, and the leases
// admitted at least 70% of what the limit alone admits of those asked.
func checkLeaseOutcome(t *testing.T, e *env, got, asked []admitted, served int64) {
	bad := replay(e, got)
	e.check(bad < 0, "the oracle denies admitted call %d (of %d admitted)", bad, len(got))
	exact := countAdmitted(e, asked) // the limit alone: what it admits of the calls asked
	e.check(served > 0, "no call was admitted from a lease")
	e.check(len(got)*10 >= exact*7, "leases admitted %d calls, the limit alone %d", len(got), exact)
	t.Logf("admitted %d (%d from leases), the limit alone %d", len(got), served, exact)
}

// newLeaseGuards returns n lease guards over l, each a process.
func newLeaseGuards(l ratelimit.Limiter, n int) []*guard.Leases {
	gs := make([]*guard.Leases, n)
	for i := range gs {
		gs[i] = guard.NewLeases(l)
	}
	return gs
}

// endExpired ends the expired leases of every guard of gs.
func endExpired(gs []*guard.Leases) {
	for _, g := range gs {
		g.EndExpired()
	}
}

// closeLeases closes every guard of gs and returns how many calls they
// served from leases in all.
func closeLeases(gs []*guard.Leases) int64 {
	var served int64
	for _, g := range gs {
		g.Close()
		_, n := g.Stats()
		served += n
	}
	return served
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
// first, which must tell what Allow then decides (see peekAgrees). The
// calls are those of the backend's own lease guard or else of
// leaseProcesses lease guards over the backend (see peekProcesses); they
// must meet both leases and denials.
func (s *suite) leasePeek(t *testing.T, alg ratelimit.Algorithm, cost int64) {
	need(t, "settle reservations", s.caps.reserve)
	need(t, "peek (ratelimit.Peek)", s.caps.peek)
	if !s.b.Clock {
		t.Skip("the backend does not read ratelimit.WithClock's clock: Peek and Allow must see one time")
	}
	lim := ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: 60, Prefetch: 100 * time.Millisecond}
	rules := leasePeekRules(lim)
	s.run(t, func(e *env) {
		rnd := rng(t)
		procs, guards := peekProcesses(e.got)
		var leased, denied int
		for i := range 900 {
			e.step = i
			e.advance(time.Duration(rnd.Int64N(int64(lim.Period / 100))))
			endExpired(guards)
			r := rules[rnd.IntN(len(rules))]
			user := []string{"ann", "bob", "cid"}[rnd.IntN(3)]
			req := ratelimit.Request{Name: r.Name, Cost: cost, Limits: r.Limits}
			if r.KeyExprs != nil {
				req.Keys = keysFor(r.KeyExprs, user)
			}
			got := peekAgrees(e, procs[rnd.IntN(len(procs))], req, i)
			if got.Source == ratelimit.SourceLease {
				leased++
			}
			if !got.Allowed {
				denied++
			}
		}
		closeLeases(guards)
		e.check(leased > 0 && denied > 0, "%d calls answered from leases, %d denied: the calls never met both", leased, denied)
		t.Logf("%d calls answered from leases, %d denied", leased, denied)
	})
}

// leasePeekRules returns the rules of leases/peek: lim alone, lim then an
// exact line per user, and that exact line then lim.
func leasePeekRules(lim ratelimit.Limit) []*ratelimit.Rule {
	user := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 25}
	return []*ratelimit.Rule{
		{Name: "leases/peek/alone", Limits: []ratelimit.Limit{lim}},
		{Name: "leases/peek/first", Limits: []ratelimit.Limit{lim, user}, KeyExprs: []string{"", "user"}},
		{Name: "leases/peek/second", Limits: []ratelimit.Limit{user, lim}, KeyExprs: []string{"user", ""}},
	}
}

// peekProcesses returns the processes of leases/peek over l and their
// lease guards: l alone when it has a lease guard of its own (found with
// guard.Of, such as redislimit.Limiter's), that guard its one, or else
// leaseProcesses lease guards over l. A guard over the backend's own
// would take leases of leases, and a Peek that ends the inner one's would
// change what the outer's lease is then charged against.
func peekProcesses(l ratelimit.Limiter) ([]ratelimit.Limiter, []*guard.Leases) {
	if own, ok := guard.Of[*guard.Leases](l); ok {
		return []ratelimit.Limiter{l}, []*guard.Leases{own}
	}
	guards := newLeaseGuards(l, leaseProcesses)
	procs := make([]ratelimit.Limiter, len(guards))
	for i, g := range guards {
		procs[i] = g
	}
	return procs, guards
}

// peekAgrees asks p to Peek req, call i of the run, then to Allow it, and
// returns Allow's decision. Peek must have told what Allow decided:
// admitted or denied, by the same limit, with the same source (a deny
// cache's repeat counting as the backend's), Remaining (Peek's is before
// the call) and, when denied, RetryAfter.
func peekAgrees(e *env, p ratelimit.Limiter, req ratelimit.Request, i int) ratelimit.Decision {
	peek, err := ratelimit.Peek(e.ctx, p, req)
	e.check(err == nil, "call %d: Peek: %v", i, err)
	got, err := p.Allow(e.ctx, req)
	e.check(err == nil, "call %d: Allow: %v", i, err)
	want := sameSource(got) // a deny cache's repeat of the backend's denial
	if got.Allowed {
		want.Remaining += req.UnitsOf(got.LimitIndex)
	}
	peek = sameSource(peek)
	e.check(peek.Allowed == want.Allowed && peek.LimitIndex == want.LimitIndex && peek.Source == want.Source && peek.Remaining == want.Remaining &&
		(peek.Allowed || peek.RetryAfter == want.RetryAfter),
		"call %d of %s: Peek told %+v, Allow decided %+v", i, req.Name, peek, got)
	return got
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
