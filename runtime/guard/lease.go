package guard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/monotime"
	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Leases is the lease guard: a [ratelimit.Limiter] that admits the calls
// of a limit with a [ratelimit.Limit.Prefetch] from leases, so that a hot
// key costs its backend a round trip per lease rather than per call, and
// never admits a call the limit would deny. It needs a backend that is a
// [ratelimit.OpReserve]; around another, it decides every call exactly, as
// the backend does.
//
// # Leases
//
// The leased line of a call is the first limit of its request with a
// Prefetch (line i, keyed by Keys[i] or Key): the guard charges N units of
// that line alone in one Reserve of a request whose state for the line is
// the line's own (a line's state is its name, key and index: line 0, or a
// shared line, is charged by a request of that one limit and key; line i
// > 0 by one of i stand-ins, each padLimit under the stand-in's key, then
// the line under its key), admits the line's calls from the lease in
// process while it lasts, and, when it ends, gives back with Adjust what
// the calls did not use (see below, per algorithm). A Prefetch on a later
// line is decided exactly: a call is admitted from one lease (the
// generator accepts prefetch= on one line of a method). A lease ends when its
// units are used, at its deadline (at most Prefetch after it was taken),
// when the call's limit for the line is not the one it was taken under
// (an override changed it), on [Leases.Reset] of its name and key, when
// the backend fails a call of the line (an outage: until the guard asks
// the backend, the lease admits what it holds, which is charged), and on
// [Leases.Close]. A lease whose give-back fails stays charged in full. A
// line that counts calls ([ratelimit.Limit.PerCall]) is leased in calls:
// each call takes 1 unit of its lease whatever its cost, and the lease's
// N units are charged, and given back, as N calls.
//
// A call with other lines is all or nothing: it takes its units from the
// lease, then asks the backend to decide its other lines alone (the leased
// line stood in for, see exactLines; a leased call with a key that begins
// with the stand-in's, a NUL then "lease stand-in ", fails as invalid, so
// that no line's state is a stand-in's); if they deny it, the units go back to
// the lease, so the call uses nothing from it. When the lease cannot
// serve the call (no lease would hold more than the call, or the backend
// denied the lease), the whole call is decided by the backend exactly, as
// without leases, so a denial is always the backend's. Reservations
// ([ratelimit.Rule.Reserve]) are decided exactly too.
//
// # Peek
//
// [Leases.Peek] answers as Allow would decide now: a call of a leased
// line that its lease can serve is admitted there, and its Remaining
// counts the units the lease holds for calls (Source
// [ratelimit.SourceLease]), where the backend's own Peek counts them as
// used. [Leases.Held] tells those units.
//
// # Size
//
// A lease holds N units: the units the process asked of the line over the
// last lease's span, times Prefetch over that span (its recent rate over
// one Prefetch), at most half of what the line had left when last charged
// (its Remaining, plus what this process gives back) divided by the
// processes sharing the backend (the fleet count of the [Fallback] in the
// chain, 1 without one), and at most the limit's MaxCost. The line is
// leased only when N exceeds the call's units.
//
// # Never over-admits
//
// Every call admitted from a lease is covered by the lease's charge,
// which the backend admitted before the call was, and which weighs in
// every window or interval where the call's own charge would have weighed.
// Times are on the backend's clock: the guard reads its own clock (the
// backend's WithClock one when it has one) when it sends the lease's
// Reserve (start), and the backend tells the time it charged (at); a call
// admitted at local time t is at backend time at most at + (t − start) and
// at least at, the clocks running at one rate.
//
//   - FixedWindow (calendar periods too) and SlidingWindow: a window's
//     count is all that weighs, wherever in the window a unit was charged.
//     A lease admits only calls in the window it was charged in (its
//     deadline is before start + (window end − at)), so its units count
//     where the calls' would. The unused ones are refunded; a refund after
//     the window ended gives nothing back (under-admission only).
//   - SlidingLog: a unit counts for a period after its time, and a call
//     at t would count until t + Period. A lease lasts hold = min(Prefetch,
//     Period/4) at most, so its calls come before at + hold. On a backend
//     that holds charges ([ratelimit.OpReserveHeld]: the memory limiter,
//     redislimit's), the
//     lease's N units are charged held: they weigh until at + hold +
//     Period, covering every call the lease can admit however it ends,
//     or if it never does (the process died, or its give-back failed).
//     Its end first charges on top the used units (logged at the end's
//     time: they weigh until then + Period, which is less when the lease
//     ends before its deadline), then refunds the whole held charge; when
//     that charge fails, it refunds only the units no call used (a held
//     charge keeps 2 units or none, so such a lease that admitted one call
//     keeps 2). A held
//     reservation goes to the backend beneath the guards between; when it
//     fails, the lease is reserved plain through them, and so are the
//     next until a plain one succeeds. On another backend, or reserved
//     plain, the N units weigh until at + Period, and the lease's end
//     first charges on top the used units (logged at the end's time,
//     after every call it admitted), then refunds the N units: exact
//     when the end is applied before at + Period, and not when it comes
//     later or never (a process that died mid-lease, a backend frozen for
//     most of a period): the used units then stop weighing before the
//     calls' own would have.
//   - TokenBucket and GCRA: the bucket's state is its theoretical arrival
//     time TAT, and a unit taken at at rather than at a later t may find
//     refill that the call's own charge would have wasted on a full
//     bucket. The lease's Remaining bounds the backlog x the bucket had
//     at at (x > (MaxCost − Remaining − 1 − N) emission intervals), and a
//     call at t can only gain max(0, (t − at) − x) of refill. So the lease
//     keeps a pad of ⌈(t − start)×Threshold/Period⌉ − backlog units that it
//     never admits (pad(t)), and its end keeps charged the used units and
//     the pad of its last call, refunding the rest: the TAT it leaves is
//     never before the one the calls would have left, and a refund only
//     moves it back by what no call used.
//
// LeakyBucket and concurrency limits take no Prefetch (their calls are
// each told their own delay, or hold a slot).
//
// # Under-admission
//
// Units a lease holds unused are charged in the backend and no other
// process can use them: per process and leased key, at most half of what
// the line had left divided by the fleet count, for at most Prefetch
// (fixed and sliding windows: until the window ends at the latest; the
// sliding log: a quarter period). A sliding log's held charge weighs
// hold longer than its calls' own (those admitted last weigh as theirs
// would), and keeps the log's entries logged after it until it goes (the
// Redis list is trimmed from its oldest end): at most hold, a quarter
// period, longer than they would; a process that dies mid-lease leaves
// its N units weighing until at + hold + Period. A bucket's pad is at most
// ⌈Prefetch×Threshold/Period⌉ units per lease, charged only while the
// bucket is fuller than Prefetch of refill.
type Leases struct {
	backend
	// held is the backend's held charges (OpReserveHeld), if any; unheld is set while a
	// held reservation failed and no plain one succeeded since (an
	// outage: the guards between see the plain ones).
	held      *nextOps
	unheld    atomic.Bool
	clock     ratelimit.Clock
	hook      ratelimit.Hook // the backend's, told of the calls leases admit
	processes func() int
	// lines holds the lines (lineID → *leaseLine), count how many; mu
	// orders their making and forgetting.
	lines sync.Map
	count atomic.Int64
	// hot is the line last looked up: a hot key's, found without hashing.
	hot atomic.Pointer[leaseLine]
	mu  sync.Mutex
	// taken counts the leases taken, served the calls admitted from them.
	taken, served atomic.Int64
}

// lineID is a leased line: line index of the calls of name (its state's,
// see ratelimit.Request.Line) whose key for the line, bounded
// (callkey.Bound), is key.
type lineID struct {
	name, key string
	index     int
}

// leaseLine is the lease state of one leased line.
type leaseLine struct {
	id lineID
	// mu orders the taking and ending of the line's leases; a call takes
	// units from a lease without it (see lease.admit).
	mu sync.Mutex
	// cur is the line's lease, or nil; set under mu.
	cur atomic.Pointer[lease]
	// gone is set once the guard forgot the line.
	gone atomic.Bool
	// asked counts the units the process asked of the line since since (µs).
	asked atomic.Int64
	since int64
	// rate is the line's recent rate, in units per second.
	rate float64
	// left is the line's Remaining when last charged; -1 when unknown.
	left int64
}

// lease is units of one line charged ahead.
type lease struct {
	req      ratelimit.Request // what was charged: units of the line
	limit    ratelimit.Limit   // the line's limit it was taken under
	at       time.Time         // when the backend charged them
	start    int64             // local µs, before the Reserve was sent
	deadline int64             // local µs: the lease admits calls before it
	units    int64             // charged
	backlog  int64             // buckets: emission intervals of backlog at at, at least
	bucket   bool              // TokenBucket or GCRA: keeps pad(t)
	log      bool              // SlidingLog: its end re-logs the used units at its time
	hold     time.Duration     // SlidingLog: how long its charge was held (OpReserveHeld); 0: not held
	timer    *time.Timer       // ends it at its deadline; set and stopped under the line's mu
	// used is the units admitted, or ended once the lease ended: calls
	// add to it with a compare-and-swap, and the end swaps it for ended,
	// so that no call is admitted after the end read what was used.
	used atomic.Int64
	// last is the local µs of the latest admission (buckets), set before
	// the admission counts in used.
	last atomic.Int64
}

// ended is a lease's used once it ended.
const ended = -1 << 62

// NewLeases returns the lease guard of backend. It reads the backend's
// clock and hook from its [ratelimit.Config] (that of its
// [ratelimit.Abilities]), and
// the number of processes sharing the backend from the [Fallback] in its
// chain (found with [Of]), 1 without one. Close it when done with it.
//
// The hook is told of each call a lease admits alone, with Source
// [ratelimit.SourceLease]; the backend tells it of the rest as without
// leases (a call's other lines, with line 0 stood in for), and of each
// lease's charge as a decision of its name (the lease's units, through
// Reserve); a give-back tells it nothing.
func NewLeases(backend ratelimit.Limiter) *Leases {
	g := &Leases{backend: backendOf(backend), processes: func() int { return 1 }}
	g.ops.Reserve, g.ops.Adjust, g.ops.TakeSlot, g.ops.Reset = g.Reserve, g.Adjust, g.ReserveSlot, g.Reset
	g.ops.Turn, g.ops.Waiting = g.turn, g.waiting
	if a := backend.Abilities(); a.Can(ratelimit.OpPeek) && a.Can(ratelimit.OpReserve) {
		g.ops.Peek = g.Peek // around another backend it leases nothing
	}
	if a := backend.Abilities(); a.Can(ratelimit.OpReserveHeld) && a.Can(ratelimit.OpRefundHeld) {
		g.held = &nextOps{backend}
	}
	if cfg := backend.Abilities().Config; cfg != nil {
		g.clock, g.hook = cfg.Clock, cfg.Hook
	}
	if f, ok := Of[*Fallback](backend); ok {
		g.processes = f.Processes
	}
	return g
}

// Unwrap returns the backend.
func (g *Leases) Unwrap() ratelimit.Limiter { return g.next }

// Do answers OpPeek as its Allow would decide, gives back what a lease
// holds before OpReset, declines OpTurn and OpWaiting of a call with a
// leased line (it waits in its process's order, admitted from the leases
// as Allow admits it), and passes on the other operations (OpReserve,
// OpAdjust and OpTakeSlot are the backend's). See [ratelimit.Limiter].
func (g *Leases) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return g.do(ctx, g, op)
}

// now returns the local time in µs.
func (g *Leases) now() int64 {
	if g.clock != nil {
		return g.clock.Now().UnixMicro()
	}
	return monotime.Micros()
}

// leasedIndex returns the index of req's leased line: its first limit
// with a Prefetch, when the backend takes reservations; else -1.
// Leased reports whether the guard admits calls of req from leases: a
// limit of req has a Prefetch, and the backend takes reservations.
func (g *Leases) Leased(req *ratelimit.Request) bool { return g.leasedIndex(req) >= 0 }

func (g *Leases) leasedIndex(req *ratelimit.Request) int {
	if g.reserver == nil {
		return -1
	}
	return prefetched(req.Limits)
}

// prefetched returns the index of the first of limits with a Prefetch,
// or -1.
func prefetched(limits []ratelimit.Limit) int {
	for i := range limits {
		if limits[i].Prefetch > 0 {
			return i
		}
	}
	return -1
}

// overridden ends the lease of the line of req's rule that its own limits
// lease, when req, which leases none, is a call of that rule: an override
// changed the leased limit.
func (g *Leases) overridden(req *ratelimit.Request) {
	r := req.Rule
	if r == nil || g.reserver == nil {
		return
	}
	if i := prefetched(r.Limits); i >= 0 && i < len(req.Limits) && (req.Keys == nil || i < len(req.Keys)) {
		g.endLine(leasedLine(req, i))
	}
}

// malformed reports a request whose shape no backend would take (the
// backend says why); the rest of a leased request is valid when the
// backend admits the lease (its leased line, of more units than the
// call's) or decides the call (its other lines, or all of it).
func malformed(req *ratelimit.Request) bool {
	return req.Cost < 0 || len(req.Limits) > ratelimit.MaxLimits || req.Keys != nil && len(req.Keys) != len(req.Limits) ||
		req.Shared != nil && (req.Keys == nil || len(req.Shared) != len(req.Limits))
}

// standIn returns the error of a leased call with a key that begins with
// the stand-ins' (see padKey), or nil.
func standIn(req *ratelimit.Request) error {
	for i := range req.Limits {
		if strings.HasPrefix(keyOf(req, i), padKey) {
			return fmt.Errorf("%w: %s: a key beginning with the lease guard's stand-in key (NUL, \"lease stand-in\")", ratelimit.ErrInvalidLimit, req.Name)
		}
		if req.Keys == nil {
			break
		}
	}
	return nil
}

// Allow admits req from the lease of its leased line and has the backend
// decide its other lines, all or nothing; a call with no leased line, or
// which no lease can serve, is the backend's to decide. See [Leases].
func (g *Leases) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	idx := g.leasedIndex(&req)
	if idx < 0 {
		g.overridden(&req)
		return g.next.Allow(ctx, req)
	}
	if malformed(&req) {
		return g.next.Allow(ctx, req) // invalid: the backend says why
	}
	if err := standIn(&req); err != nil {
		return ratelimit.Decision{}, err
	}
	units := req.UnitsOf(idx)
	ln := g.line(leasedLine(&req, idx))
	l, left, err := ln.take(ctx, g, &req, idx, units)
	if err != nil {
		return ratelimit.Decision{}, err // take ended the lease
	}
	if l == nil {
		d, err := g.next.Allow(ctx, req)
		if err == nil && d.LimitIndex == idx {
			ln.learn(d.Remaining)
		}
		return d, err
	}
	if len(req.Limits) == 1 {
		g.served.Add(1)
		d := ratelimit.Decision{Allowed: true, Remaining: left, Source: ratelimit.SourceLease}
		if g.hook != nil {
			g.decided(ctx, req, d)
		}
		return d, nil
	}
	d, err := g.next.Allow(ctx, exactLines(&req, idx))
	if err != nil || !d.Allowed {
		l.untake(units)
		if err != nil {
			g.endLine(ln.id) // an outage ends the lease
		}
		return d, err
	}
	g.served.Add(1)
	return tightest(d, idx, left), nil
}

// tightest returns d, the admission of a call's other lines, as the
// admission of the whole call whose leased line idx has left units left
// in its lease after the call: the lease's, with Source
// [ratelimit.SourceLease], when it has fewer remaining units than d's
// limit (or as few, and comes first).
func tightest(d ratelimit.Decision, idx int, left int64) ratelimit.Decision {
	if left < d.Remaining || left == d.Remaining && idx < d.LimitIndex {
		d.Remaining, d.LimitIndex, d.Source = left, idx, ratelimit.SourceLease
	}
	return d
}

// Peek returns the decision Allow would return for req now, charging
// nothing (see [ratelimit.Peek]): a call of a leased line that the
// line's lease can serve is answered from it (Remaining is the units the
// lease holds for calls, before the call, with Source
// [ratelimit.SourceLease], or the other lines' answer when they deny it
// or have fewer left), one whose lease cannot serve it as Allow decides
// it after taking the lease it would take (answered from the units that
// lease would hold when the backend would admit it), and any other by the
// backend's Peek. A Peek that the line's lease cannot serve ends the
// lease, giving back what it did not use, as the call would; it takes no
// lease and tells the hook nothing.
func (g *Leases) Peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	idx := g.leasedIndex(&req)
	if idx < 0 {
		g.overridden(&req)
	}
	// A slot is decided with the rate limits, by the backend (see
	// ratelimit.Peek); an invalid request is the backend's to refuse.
	if idx < 0 || slices.ContainsFunc(req.Limits, isSlot) || malformed(&req) {
		return ratelimit.Peek(ctx, g.next, req)
	}
	if err := standIn(&req); err != nil {
		return ratelimit.Decision{}, err
	}
	limit, units, now := req.Limits[idx], req.UnitsOf(idx), g.now()
	ln := g.lookup(leasedLine(&req, idx))
	if ln == nil {
		ln = &leaseLine{left: -1, since: now} // the line a call would make, not kept
	}
	ln.mu.Lock()
	if l := ln.cur.Load(); l != nil && l.limit == limit && l.fits(units, now) {
		free := l.free(now)
		ln.mu.Unlock()
		return g.peekFrom(ctx, &req, idx, free)
	}
	ln.end(g) // the call would end it
	n := ln.nextSize(g, limit, units, now)
	ln.mu.Unlock()
	if n <= units {
		return ratelimit.Peek(ctx, g.next, req)
	}
	d, err := ratelimit.Peek(ctx, g.next, leaseRequest(&req, idx, n))
	if err != nil || !d.Allowed {
		if err != nil {
			return ratelimit.Decision{}, err
		}
		return ratelimit.Peek(ctx, g.next, req) // the lease denied: the call is decided exactly
	}
	return g.peekFrom(ctx, &req, idx, n) // a new lease holds n units, no pad yet
}

// peekFrom returns Peek's answer to req when its leased line idx is
// served by a lease that holds free units for calls.
func (g *Leases) peekFrom(ctx context.Context, req *ratelimit.Request, idx int, free int64) (ratelimit.Decision, error) {
	if len(req.Limits) == 1 {
		return ratelimit.Decision{Allowed: true, Remaining: free, Source: ratelimit.SourceLease}, nil
	}
	d, err := ratelimit.Peek(ctx, g.next, exactLines(req, idx))
	if err != nil || !d.Allowed {
		return d, err
	}
	// Allow's decision, then Peek's: Remaining before the call.
	d.Remaining -= req.UnitsOf(d.LimitIndex)
	d = tightest(d, idx, free-req.UnitsOf(idx))
	d.Remaining += req.UnitsOf(d.LimitIndex)
	return d, nil
}

// isSlot reports whether l is a concurrency limit.
func isSlot(l ratelimit.Limit) bool { return l.Algorithm == "concurrency" }

// decided tells the hook of d, a decision of req. It takes req by value,
// so that only a guard with a hook moves a request to the heap.
func (g *Leases) decided(ctx context.Context, req ratelimit.Request, d ratelimit.Decision) {
	g.hook.Decided(ctx, &req, d)
}

// endLine ends the lease of id, if any.
func (g *Leases) endLine(id lineID) {
	if ln := g.lookup(id); ln != nil {
		ln.mu.Lock()
		ln.end(g)
		ln.mu.Unlock()
	}
}

// learn notes the line's Remaining, which a decision of the backend told.
func (ln *leaseLine) learn(remaining int64) {
	ln.mu.Lock()
	ln.left = remaining
	ln.mu.Unlock()
}

// untake gives back to l, unless it ended, the units a call took from it.
func (l *lease) untake(units int64) {
	for {
		old := l.used.Load()
		if old < 0 || l.used.CompareAndSwap(old, old-units) {
			return
		}
	}
}

// lookup returns the lease state of id, or nil.
func (g *Leases) lookup(id lineID) *leaseLine {
	if h := g.hot.Load(); h != nil && h.id == id && !h.gone.Load() {
		return h
	}
	if v, ok := g.lines.Load(id); ok {
		ln := v.(*leaseLine)
		g.hot.Store(ln)
		return ln
	}
	return nil
}

// line returns the lease state of id, made on first use. Past maxLines
// lines, it first forgets those without a lease.
func (g *Leases) line(id lineID) *leaseLine {
	if ln := g.lookup(id); ln != nil {
		return ln
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.count.Load() >= maxLines {
		g.lines.Range(func(k, v any) bool {
			if o := v.(*leaseLine); o.mu.TryLock() {
				if o.cur.Load() == nil && g.lines.CompareAndDelete(k, o) {
					o.gone.Store(true)
					g.count.Add(-1)
				}
				o.mu.Unlock()
			}
			return true
		})
	}
	v, loaded := g.lines.LoadOrStore(id, &leaseLine{id: id, left: -1, since: g.now()})
	if !loaded {
		g.count.Add(1)
	}
	return v.(*leaseLine)
}

// maxLines is how many lines a guard keeps before it forgets those
// without a lease (a line with a lease is forgotten when it ends idle).
const maxLines = 1 << 16

// take takes units for a call of req from the lease of its line idx,
// taking a new lease when the current one cannot serve it. It returns
// the lease and the units it has left for calls, or a nil lease when no
// lease can serve the call (the backend then decides it exactly).
func (ln *leaseLine) take(ctx context.Context, g *Leases, req *ratelimit.Request, idx int, units int64) (*lease, int64, error) {
	limit := req.Limits[idx]
	ln.asked.Add(units)
	now := g.now()
	if l := ln.cur.Load(); l != nil && l.limit == limit && l.admit(units, now) {
		return l, l.free(now), nil
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if l := ln.cur.Load(); l != nil && l.limit == limit && l.admit(units, now) {
		return l, l.free(now), nil // another call took it meanwhile
	}
	// The lease cannot serve the call: end it, and take the next.
	ln.end(g)
	n := ln.size(g, limit, units, now)
	if n <= units {
		return nil, 0, nil
	}
	l, left, err := g.reserve(ctx, req, idx, n, now)
	if err != nil || l == nil {
		if err == nil {
			ln.left = left
		}
		return nil, 0, err
	}
	ln.left = left
	g.taken.Add(1)
	if g.clock == nil {
		l.timer = time.AfterFunc(time.Duration(l.deadline-now)*time.Microsecond, func() { ln.expire(g, l) })
	}
	ln.cur.Store(l)
	if !l.admit(units, now) {
		return nil, 0, nil
	}
	return l, l.free(now), nil
}

// size returns the units of the next lease of the line, at now, for a
// call of units, and notes the line's recent rate: see Size at [Leases].
func (ln *leaseLine) size(g *Leases, limit ratelimit.Limit, units, now int64) int64 {
	if asked := ln.asked.Swap(0); asked > 0 {
		ln.rate = rateOf(ln.rate, asked, now-ln.since, limit)
		ln.since = now
	}
	return sizeOf(g, ln.rate, ln.left, limit, units)
}

// nextSize is size without noting anything, for a call of units that
// Allow has not counted in asked yet: the units its lease would hold.
func (ln *leaseLine) nextSize(g *Leases, limit ratelimit.Limit, units, now int64) int64 {
	rate := ln.rate
	if asked := ln.asked.Load() + units; asked > 0 {
		rate = rateOf(rate, asked, now-ln.since, limit)
	}
	return sizeOf(g, rate, ln.left, limit, units)
}

// rateOf returns a line's recent rate, in units per second, when it was
// rate and the process asked asked units over the last span µs.
func rateOf(rate float64, asked, span int64, limit ratelimit.Limit) float64 {
	span = max(span, 1) // a clock that stands still: a µs
	inst := float64(asked) * 1e6 / float64(span)
	if rate == 0 || span >= limit.Prefetch.Microseconds() {
		return inst
	}
	return max(inst, rate/2)
}

// sizeOf returns the units of a lease of a line whose recent rate is rate
// and whose Remaining was left when last charged (-1: unknown), for a
// call of units.
func sizeOf(g *Leases, rate float64, left int64, limit ratelimit.Limit, units int64) int64 {
	n := int64(rate*limit.Prefetch.Seconds()) + 1
	if left < 0 {
		left = limit.MaxCost()
	}
	share := left / (2 * int64(max(g.processes(), 1)))
	return min(n, max(share, units), limit.MaxCost())
}

// fits reports whether admit would admit a call of units at now.
func (l *lease) fits(units, now int64) bool {
	if now >= l.deadline || now < l.start {
		return false
	}
	used := l.used.Load()
	return used >= 0 && used+units+l.pad(now) <= l.units
}

// admit admits a call of units at now (local µs) from the lease, if it
// holds them: the lease has not ended, its deadline is ahead, and the
// units fit beside those used (and a bucket's pad).
func (l *lease) admit(units, now int64) bool {
	if now >= l.deadline || now < l.start {
		return false
	}
	if l.bucket {
		for last := l.last.Load(); now > last && !l.last.CompareAndSwap(last, now); last = l.last.Load() {
		}
	}
	for {
		old := l.used.Load()
		if old < 0 || old+units+l.pad(now) > l.units {
			return false
		}
		if l.used.CompareAndSwap(old, old+units) {
			return true
		}
	}
}

// free returns the units the lease holds for calls at now.
func (l *lease) free(now int64) int64 {
	used := l.used.Load()
	if used < 0 {
		return 0
	}
	return max(l.units-used-l.pad(now), 0)
}

// pad returns the units a bucket's lease keeps for a call at now (local
// µs): ⌈(now − start)×Threshold/Period⌉ minus its backlog, at least 0; 0
// for other algorithms. See Never over-admits at [Leases].
func (l *lease) pad(now int64) int64 {
	if !l.bucket || now <= l.start {
		return 0
	}
	q, r := muldiv.Rem(now-l.start, l.limit.Threshold, l.limit.Period.Microseconds())
	if r > 0 {
		q++
	}
	return max(q-l.backlog, 0)
}

// kept returns the units the lease keeps charged when it ends, used
// having been used: those, and a bucket's pad at its last call.
func (l *lease) kept(used int64) int64 {
	if used == 0 {
		return 0
	}
	return min(used+l.pad(l.last.Load()), l.units)
}

// end ends the line's lease, if any, giving back what it did not use.
func (ln *leaseLine) end(g *Leases) {
	l := ln.cur.Swap(nil)
	if l == nil {
		return
	}
	used := l.used.Swap(ended)
	if used < 0 {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	ln.left += l.units - l.kept(used)
	g.giveBack(l, used)
}

// expire ends l, when it is still the line's lease and its deadline
// passed, and forgets the line, which no call renewed: the guard keeps
// the lines leased within a Prefetch. A call that holds the line still
// may take a lease on it; the next call makes a new one. Either lease is
// charged on its own, so two leases of one line are exact too.
func (ln *leaseLine) expire(g *Leases, l *lease) {
	ln.mu.Lock()
	current := ln.cur.Load() == l
	if current {
		ln.end(g)
	}
	ln.mu.Unlock()
	if current {
		if g.lines.CompareAndDelete(ln.id, ln) {
			ln.gone.Store(true)
			g.count.Add(-1)
		}
	}
}

// giveBack gives back what l did not use, as its algorithm needs (see
// Never over-admits at [Leases]), on the caller's goroutine: the line's
// next lease is taken after it, in order. It reports a failure nowhere:
// the units stay charged.
func (g *Leases) giveBack(l *lease, used int64) {
	ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
	defer cancel()
	if l.hold > 0 {
		// The held charge covers the calls whatever happens. Re-logging
		// the used units at the end's time weighs less when the lease
		// ends before its deadline; then the whole held charge goes back.
		// A re-log that fails keeps the held charge for the used units.
		if used > 0 && g.reserver.Adjust(ctx, l.req, l.at, used) != nil {
			if back := l.units - used; back > 0 {
				_ = g.held.RefundHeld(ctx, l.req, l.at, l.hold, back)
			}
			return
		}
		_ = g.held.RefundHeld(ctx, l.req, l.at, l.hold, l.units)
		return
	}
	if l.log {
		if used > 0 && g.reserver.Adjust(ctx, l.req, l.at, used) != nil {
			return // the lease's units stay logged at at: never fewer
		}
		_ = g.reserver.Adjust(ctx, l.req, l.at, -l.units)
		return
	}
	if back := l.units - l.kept(used); back > 0 {
		_ = g.reserver.Adjust(ctx, l.req, l.at, -back)
	}
}

// giveBackTimeout bounds a lease's give-back.
const giveBackTimeout = 5 * time.Second

// leaseRequest returns the request that charges n units of line idx of
// req alone, under the line's own state: a request of that one limit and
// key for line 0 or a shared line (whose state is limit 0 of its name);
// else one of idx stand-ins (padLimit, under padKey and the line's key),
// then the line under its key. The line's limit leases nothing there
// (no Prefetch) and takes the n units even when it counts calls
// (PerCall): a lease's n units are n calls, which Adjust gives back as
// units.
func leaseRequest(req *ratelimit.Request, idx int, n int64) ratelimit.Request {
	units := req.Limits[idx]
	units.PerCall, units.Prefetch = false, 0
	name, j := req.Line(idx)
	key := keyOf(req, idx)
	if j == 0 {
		return ratelimit.Request{Name: name, Key: key, Cost: n, Limits: []ratelimit.Limit{units}}
	}
	lr := ratelimit.Request{Name: name, Cost: n, Limits: make([]ratelimit.Limit, j+1), Keys: make([]string, j+1)}
	for k := range j {
		lr.Limits[k], lr.Keys[k] = padLimit, padKey+key
	}
	lr.Limits[j], lr.Keys[j] = units, key
	return lr
}

// reserve takes a lease of n units of line idx of req at now, and
// returns it with the line's Remaining after the charge, or a nil lease
// when the backend denies it.
func (g *Leases) reserve(ctx context.Context, req *ratelimit.Request, idx int, n, now int64) (*lease, int64, error) {
	limit := req.Limits[idx]
	lr := leaseRequest(req, idx, n)
	d, at, hold, err := g.reserveLease(ctx, lr, g.holdOf(limit))
	if err != nil || !d.Allowed {
		if err != nil {
			return nil, -1, err
		}
		return nil, d.Remaining, nil
	}
	l := &lease{req: lr, limit: limit, at: at, start: now, units: n, deadline: now + limit.Prefetch.Microseconds(), hold: hold}
	switch a := factsOf(limit); {
	case a.State == limitfacts.Window || a.State == limitfacts.Windows:
		end := windowEnd(limit, at.UnixMicro())
		l.deadline = min(l.deadline, now+end-at.UnixMicro())
	case a.State == limitfacts.Log:
		l.log = true
		l.deadline = now + min(limit.Prefetch, limit.Period/4).Microseconds()
	case a.State == limitfacts.Bucket && !a.Paces: // a bucket that paces (leaky_bucket) takes no Prefetch
		l.bucket = true
		l.backlog = max(limit.MaxCost()-d.Remaining-1-n, 0)
	}
	return l, d.Remaining, nil
}

// holdOf returns the hold of a lease of limit: for a SlidingLog, when the
// backend is one that holds charges (OpReserveHeld) and that did not fail since its last plain
// reservation, its life (Prefetch, at most a quarter period); else 0.
func (g *Leases) holdOf(limit ratelimit.Limit) time.Duration {
	if g.held == nil || g.unheld.Load() || factsOf(limit).State != limitfacts.Log {
		return 0
	}
	return min(limit.Prefetch, limit.Period/4)
}

// reserveLease charges lr, held hold when it is positive, and returns
// the hold it was charged with. A held reservation goes to the backend
// beneath the guards between (deny cache, breaker, fallback); when it
// fails, the lease is reserved plain through them, and so are the next
// ones until one succeeds, so that an outage is seen by the breaker and
// the fallback as without holds.
func (g *Leases) reserveLease(ctx context.Context, lr ratelimit.Request, hold time.Duration) (ratelimit.Decision, time.Time, time.Duration, error) {
	if hold > 0 {
		d, at, err := g.held.ReserveHeld(ctx, lr, hold)
		if err == nil {
			return d, at, hold, nil
		}
		g.unheld.Store(true)
	}
	d, at, err := g.reserver.Reserve(ctx, lr)
	if err == nil {
		g.unheld.Store(false)
	}
	return d, at, 0, err
}

// windowEnd returns the end (µs) of the window of a limit counted in
// windows (a Window or Windows state) that holds the time at (µs).
func windowEnd(limit ratelimit.Limit, at int64) int64 {
	f := limitfacts.Limit{Period: limit.Period, Calendar: limit.Calendar, TZ: limit.TZ, Threshold: limit.Threshold, Algorithm: string(limit.Algorithm)}
	if cal, ok := f.CalendarOf(); ok {
		return cal.End(at)
	}
	p := limit.Period.Microseconds()
	return at - at%p + p
}

// padKey begins the key of the stand-ins of exactLines and leaseRequest.
// A leased call with a key that begins with it fails (see Allow): no
// call's line keeps its state under a stand-in's key.
const padKey = "\x00lease stand-in "

// padLimit is the stand-ins' limit: it admits any call, and its state
// ends within a millisecond.
var padLimit = ratelimit.Limit{Period: time.Millisecond, Threshold: 1<<50 - 1, Algorithm: ratelimit.FixedWindow}

// exactLines returns the request of req's lines but the leased one, idx,
// each keeping its state (its name, key and index): line idx is a
// stand-in, padLimit under padKey and the key of another line (so that
// on a Redis Cluster the stand-ins of different keys spread over the
// masters), which admits the call and keeps no state of any call's
// lines; the shared lines among the others stay shared (Request.Shared).
func exactLines(req *ratelimit.Request, idx int) ratelimit.Request {
	out := ratelimit.Request{Name: req.Name, Cost: req.Cost, Limits: make([]ratelimit.Limit, len(req.Limits)), Keys: make([]string, len(req.Limits))}
	for i := range req.Limits {
		out.Limits[i], out.Keys[i] = req.Limits[i], keyOf(req, i)
	}
	other := 0
	if idx == 0 {
		other = 1
	}
	out.Limits[idx], out.Keys[idx] = padLimit, padKey+keyOf(req, other)
	if req.Shared != nil { // the shared lines keep their own state
		out.Shared = slices.Clone(req.Shared)
		out.Shared[idx] = ""
	}
	return out
}

// leasedLine returns the line of req's limit idx: its state's name and
// index (a shared line's own, see ratelimit.Request.Line) and bounded key.
func leasedLine(req *ratelimit.Request, idx int) lineID {
	name, j := req.Line(idx)
	return lineID{name, callkey.Bound(keyOf(req, idx)), j}
}

// keyOf returns the key of line i of req.
func keyOf(req *ratelimit.Request, i int) string {
	if req.Keys != nil {
		return req.Keys[i]
	}
	return req.Key
}

// Reserve passes the call on to the backend: reservations are exact.
func (g *Leases) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	if g.reserver == nil {
		return ratelimit.Decision{}, time.Time{}, g.unsupported("reserve")
	}
	return g.reserver.Reserve(ctx, req)
}

// Adjust passes the call on to the backend.
func (g *Leases) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if g.reserver == nil {
		return g.unsupported("adjust")
	}
	return g.reserver.Adjust(ctx, req, at, delta)
}

// ReserveSlot passes the call on to the backend.
func (g *Leases) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	if g.slots == nil {
		return ratelimit.Decision{}, time.Time{}, g.unsupported("hold concurrency slots")
	}
	return g.slots.ReserveSlot(ctx, req, slot, token)
}

// Reset ends the leases of name and key, giving back what they did not
// use, then resets name and key in the backend.
func (g *Leases) Reset(ctx context.Context, name, key string) error {
	if g.resetter == nil {
		return g.unsupported("reset")
	}
	named := callkey.Named(key)
	g.endWhere(func(id lineID, _ *lease) bool { return id.name == name && id.key == named })
	return g.resetter.Reset(ctx, name, key)
}

// Held returns the units this process holds unused in the lease of the
// leased line of the calls of name (a shared line's own name, see
// ratelimit.Request.Line) whose key for that line is key: charged in the
// backend, whose own Peek counts them as used, but admitted here until
// the lease ends ([Leases.Peek] counts them in Remaining, as Allow
// admits them).
func (g *Leases) Held(name, key string) int64 {
	key = callkey.Named(key)
	var held int64
	for i := range ratelimit.MaxLimits {
		ln := g.lookup(lineID{name, key, i})
		if ln == nil {
			continue
		}
		ln.mu.Lock()
		if l := ln.cur.Load(); l != nil && g.now() < l.deadline {
			held += l.free(g.now())
		}
		ln.mu.Unlock()
	}
	return held
}

// Lines returns how many lines the guard keeps: those with a lease, or
// leased within a Prefetch.
func (g *Leases) Lines() int {
	return int(g.count.Load())
}

// Stats returns how many leases the guard took, and how many calls it
// admitted from them.
func (g *Leases) Stats() (leases, served int64) { return g.taken.Load(), g.served.Load() }

// EndExpired ends the leases whose deadline passed on the guard's clock.
// Timers do it on the process's clock; a guard whose backend has a
// WithClock clock (in tests) ends them on its next call of the line, or
// when EndExpired is called.
func (g *Leases) EndExpired() {
	now := g.now()
	g.endWhere(func(_ lineID, l *lease) bool { return l.deadline <= now })
}

// Close ends every lease, giving back what it did not use.
func (g *Leases) Close() {
	g.endWhere(func(lineID, *lease) bool { return true })
}

// endWhere ends the leases that match matches.
func (g *Leases) endWhere(match func(lineID, *lease) bool) {
	var lines []*leaseLine
	g.lines.Range(func(_, v any) bool {
		lines = append(lines, v.(*leaseLine))
		return true
	})
	for _, ln := range lines {
		ln.mu.Lock()
		if l := ln.cur.Load(); l != nil && match(ln.id, l) {
			ln.end(g)
		}
		ln.mu.Unlock()
	}
}

// unsupported returns the error of a call the backend does not offer.
func (g *Leases) unsupported(what string) error { return unsupported(g.next, what) }
