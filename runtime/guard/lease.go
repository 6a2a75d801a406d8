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
	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Leases is the lease guard: a [ratelimit.Wrapper] that admits the calls
// of a limit with a [ratelimit.Limit.Prefetch] from leases, so that a hot
// key costs its backend a round trip per lease rather than per call, and
// never admits a call the limit would deny. It needs a backend that is a
// [ratelimit.Reserver]; around another, it decides every call exactly, as
// the backend does.
//
// # Leases
//
// The first line of a call (limit 0 of its request, keyed by Keys[0] or
// Key) is leased when its limit has a Prefetch: the guard charges N units
// of that line alone in one Reserve of a request of that one limit and
// key, whose state is the line's own (a line's state is its name, key and
// index; index 0 is the same alone or beside other limits), admits the
// line's calls from the lease in process while it lasts, and, when it
// ends, gives back with Adjust what the calls did not use (see below, per
// algorithm). A Prefetch on another line is decided exactly: only the
// first line can be charged alone under its own state (the generator
// accepts prefetch= on a method's first line only). A lease ends when its
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
// lease, then asks the backend to decide its other lines alone (line 0
// stood in for, see exactLines; a call whose first key begins with the
// stand-in's, a NUL then "lease stand-in ", fails as invalid, so that no
// leased line's state is a stand-in's); if they deny it, the units go back to
// the lease, so the call uses nothing from it. When the lease cannot
// serve the call (no lease would hold more than the call, or the backend
// denied the lease), the whole call is decided by the backend exactly, as
// without leases, so a denial is always the backend's. Reservations
// ([ratelimit.Rule.Reserve]) are decided exactly too.
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
//   - SlidingLog: a unit counts for a period after its time. The lease's N
//     units, logged at at, cover the calls until at + Period; a call at t
//     would count until t + Period. So the lease lasts at most a quarter
//     Period, and its end first charges on top the used units (logged at
//     the end's time, after every call it admitted), then refunds the N
//     units logged at at. That is exact when the backend applies the end
//     before at + Period (three quarters of a period after the lease's
//     last call at the latest); a backend that stalls longer than that
//     (Redis frozen for most of a period) lets the used units weigh only
//     from the end's time, which the guard cannot prevent.
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
// sliding log: a quarter period). A bucket's pad is at most
// ⌈Prefetch×Threshold/Period⌉ units per lease, charged only while the
// bucket is fuller than Prefetch of refill.
type Leases struct {
	backend
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

// lineID is a leased line: the first line of the calls of name whose
// first key, bounded (callkey.Bound), is key.
type lineID struct{ name, key string }

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
	log      bool              // SlidingLog: its end re-logs the used units
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
// clock and hook from its [ratelimit.Config] ([ratelimit.Configured]), and
// the number of processes sharing the backend from the [Fallback] in its
// chain (found with [Of]), 1 without one. Close it when done with it.
//
// The hook is told of each call a lease admits alone, with Source
// [ratelimit.SourceLease]; the backend tells it of the rest as without
// leases (a call's other lines, with line 0 stood in for), and of each
// lease's charge as a decision of its name (the lease's units, through
// Reserve); a give-back tells it nothing.
func NewLeases(backend ratelimit.Limiter, opts ...Option) *Leases {
	g := &Leases{backend: backendOf(backend), processes: func() int { return 1 }}
	if cfg, ok := ratelimit.As[ratelimit.Configured](backend); ok {
		g.clock, g.hook = cfg.Config().Clock, cfg.Config().Hook
	}
	if f, ok := Of[*Fallback](backend); ok {
		g.processes = f.Processes
	}
	return g
}

// Unwrap returns the backend.
func (g *Leases) Unwrap() ratelimit.Limiter { return g.next }

// now returns the local time in µs.
func (g *Leases) now() int64 {
	if g.clock != nil {
		return g.clock.Now().UnixMicro()
	}
	return time.Now().UnixMicro()
}

// leased reports whether req's first line is leased: it has a Prefetch
// and the backend takes reservations.
func (g *Leases) leased(req *ratelimit.Request) bool {
	return g.reserver != nil && len(req.Limits) > 0 && req.Limits[0].Prefetch > 0
}

// Allow admits req from the lease of its first line and has the backend
// decide its other lines, all or nothing; a call whose first line is not
// leased, or which no lease can serve, is the backend's to decide. See
// [Leases].
func (g *Leases) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if !g.leased(&req) {
		if r := req.Rule; r != nil && len(r.Limits) > 0 && r.Limits[0].Prefetch > 0 && g.reserver != nil {
			g.endLine(leasedLine(&req)) // an override changed the leased limit
		}
		return g.next.Allow(ctx, req)
	}
	if req.Cost < 0 || len(req.Limits) > ratelimit.MaxLimits || req.Keys != nil && len(req.Keys) != len(req.Limits) ||
		req.Shared != nil && (req.Keys == nil || len(req.Shared) != len(req.Limits)) {
		return g.next.Allow(ctx, req) // invalid: the backend says why
	}
	// The rest of req is valid when the backend admits the lease (line 0,
	// of more units than the call's) or decides the call (its other lines,
	// or all of it).
	if strings.HasPrefix(keyOf(&req, 0), padKey) {
		return ratelimit.Decision{}, fmt.Errorf("%w: %s: a key beginning with the lease guard's stand-in key (NUL, \"lease stand-in\")", ratelimit.ErrInvalidLimit, req.Name)
	}
	units := req.UnitsOf(0)
	ln := g.line(leasedLine(&req))
	l, left, err := ln.take(ctx, g, &req, units)
	if err != nil {
		return ratelimit.Decision{}, err // take ended the lease
	}
	if l == nil {
		d, err := g.next.Allow(ctx, req)
		if err == nil && d.LimitIndex == 0 {
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
	d, err := g.next.Allow(ctx, exactLines(&req))
	if err != nil || !d.Allowed {
		l.untake(units)
		if err != nil {
			g.endLine(ln.id) // an outage ends the lease
		}
		return d, err
	}
	if left < d.Remaining {
		d.Remaining, d.LimitIndex = left, 0
	}
	g.served.Add(1)
	return d, nil
}

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

// take takes units for a call of req from the lease of its first line, taking a new
// lease when the current one cannot serve it. It returns the lease and
// the units it has left for calls, or a nil lease when no lease can serve
// the call (the backend then decides it exactly).
func (ln *leaseLine) take(ctx context.Context, g *Leases, req *ratelimit.Request, units int64) (*lease, int64, error) {
	limit := req.Limits[0]
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
	l, left, err := g.reserve(ctx, req, n, now)
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
// call of units: see Size at [Leases].
func (ln *leaseLine) size(g *Leases, limit ratelimit.Limit, units, now int64) int64 {
	if asked := ln.asked.Swap(0); asked > 0 {
		span := max(now-ln.since, 1) // a clock that stands still: a µs
		inst := float64(asked) * 1e6 / float64(span)
		if ln.rate == 0 || span >= limit.Prefetch.Microseconds() {
			ln.rate = inst
		} else {
			ln.rate = max(inst, ln.rate/2)
		}
		ln.since = now
	}
	n := int64(ln.rate*limit.Prefetch.Seconds()) + 1
	left := ln.left
	if left < 0 {
		left = limit.MaxCost()
	}
	share := left / (2 * int64(max(g.processes(), 1)))
	return min(n, max(share, units), limit.MaxCost())
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

// reserve takes a lease of n units of the first line of req at now, and
// returns it with the line's Remaining after the charge, or a nil lease
// when the backend denies it.
func (g *Leases) reserve(ctx context.Context, req *ratelimit.Request, n, now int64) (*lease, int64, error) {
	limit := req.Limits[0]
	// A lease's n units are n calls of a line that counts calls
	// (PerCall): the backend charges them as units, and Adjust gives back
	// the unused.
	units := limit
	units.PerCall = false
	name, _ := req.Line(0) // a shared line's state is limit 0 of its name
	lr := ratelimit.Request{Name: name, Key: keyOf(req, 0), Cost: n, Limits: []ratelimit.Limit{units}}
	d, at, err := g.reserver.Reserve(ctx, lr)
	if err != nil || !d.Allowed {
		if err != nil {
			return nil, -1, err
		}
		return nil, d.Remaining, nil
	}
	l := &lease{req: lr, limit: limit, at: at, start: now, units: n, deadline: now + limit.Prefetch.Microseconds()}
	switch limit.AlgorithmOrDefault() {
	case ratelimit.FixedWindow, ratelimit.SlidingWindow:
		end := windowEnd(limit, at.UnixMicro())
		l.deadline = min(l.deadline, now+end-at.UnixMicro())
	case ratelimit.SlidingLog:
		l.log = true
		l.deadline = min(l.deadline, now+limit.Period.Microseconds()/4)
	case ratelimit.TokenBucket, ratelimit.GCRA:
		l.bucket = true
		l.backlog = max(limit.MaxCost()-d.Remaining-1-n, 0)
	}
	return l, d.Remaining, nil
}

// windowEnd returns the end (µs) of the window of a FixedWindow or
// SlidingWindow limit that holds the time at (µs).
func windowEnd(limit ratelimit.Limit, at int64) int64 {
	f := limitfacts.Limit{Period: limit.Period, Calendar: limit.Calendar, TZ: limit.TZ, Threshold: limit.Threshold, Algorithm: string(limit.Algorithm)}
	if cal, ok := f.CalendarOf(); ok {
		return cal.End(at)
	}
	p := limit.Period.Microseconds()
	return at - at%p + p
}

// padKey begins the key of exactLines' stand-in for line 0. A call whose
// first key begins with it fails (see Allow): no call's line 0 keeps its
// state under a stand-in's key.
const padKey = "\x00lease stand-in "

// padLimit is exactLines' stand-in for line 0: it admits any call, and
// its state ends within a millisecond.
var padLimit = ratelimit.Limit{Period: time.Millisecond, Threshold: 1<<50 - 1, Algorithm: ratelimit.FixedWindow}

// exactLines returns the request of req's lines but the first, each
// keeping its state (its name, key and index): line 0 is a stand-in,
// padLimit under padKey and the key of line 1 (so that on a Redis
// Cluster the stand-ins of different keys spread over the masters), which
// admits the call and keeps no state of any call's lines; the shared
// lines among the others stay shared (Request.Shared).
func exactLines(req *ratelimit.Request) ratelimit.Request {
	out := ratelimit.Request{Name: req.Name, Cost: req.Cost, Limits: make([]ratelimit.Limit, len(req.Limits)), Keys: make([]string, len(req.Limits))}
	for i := range req.Limits {
		out.Limits[i], out.Keys[i] = req.Limits[i], keyOf(req, i)
	}
	out.Limits[0], out.Keys[0] = padLimit, padKey+keyOf(req, 1)
	if req.Shared != nil { // the shared lines keep their own state
		out.Shared = slices.Clone(req.Shared)
		out.Shared[0] = ""
	}
	return out
}

// leasedLine returns the line of req's first limit: its state's name (a
// shared line's own, see ratelimit.Request.Line) and bounded key.
func leasedLine(req *ratelimit.Request) lineID {
	name, _ := req.Line(0)
	return lineID{name, callkey.Bound(keyOf(req, 0))}
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
// first line of the calls of name whose first key is key: charged in the
// backend (so a Peek's Remaining does not count them) but admitted here
// until the lease ends.
func (g *Leases) Held(name, key string) int64 {
	ln := g.lookup(lineID{name, callkey.Named(key)})
	if ln == nil {
		return 0
	}
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if l := ln.cur.Load(); l != nil && g.now() < l.deadline {
		return l.free(g.now())
	}
	return 0
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
