package guard

import (
	"context"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Carrier is what a backend offers a fallback (reported in its
// [ratelimit.Abilities.ForGuards]) to be charged what the fallback
// admitted while it could not decide, at the times it was admitted,
// without deciding anything (the carry-back; Redis's side is a script
// that charges a call at a time it is given).
type Carrier interface {
	// Carry charges each admission to the backend, to the limits of its
	// request whose windows are still open (or, as a sliding window's
	// previous window, still weigh), at its time, deciding nothing: an
	// admission that no longer fits is charged all the same, within the
	// bound the backend keeps a state to (the backend documents it; what
	// is beyond it is dropped). A limit that counts calls
	// (ratelimit.Limit.PerCall) takes 1 of each admission, whatever its
	// cost. Each limit is charged where the backend keeps its state (a
	// shared line's under its own name: ratelimit.Request.Line). It
	// returns what it charged and dropped, in units, and the admissions
	// it could not ask the backend about, which the fallback keeps for
	// the next time (an admission that may have been charged without a
	// reply is dropped, never sent twice).
	Carry(ctx context.Context, admissions []Admission) CarryResult
}

// Admission is what a fallback admitted, to be carried back.
type Admission struct {
	// Req is the request admitted: its name, key or keys and limits; its
	// Cost is the units admitted.
	Req ratelimit.Request
	// Only lists the indices of the limits of Req to charge; nil: all.
	Only []int
	// At is when it was admitted, on the backend's clock (its
	// [ratelimit.WithClock] clock, else the process's wall clock).
	At time.Time
}

// CarryResult is what a [Carrier] did with admissions.
type CarryResult struct {
	// Charged and Dropped count the units charged, and those admitted
	// but not charged (they did not fit, or may have been charged without
	// a reply).
	Charged, Dropped int64
	// Kept is what the backend could not be asked about.
	Kept []Admission
}

// The bounds of the carry-back.
const (
	// MaxCarried bounds the admissions remembered, over all calls: an
	// admission beyond it is not carried back (it is counted as dropped).
	MaxCarried = 1 << 16
	// MaxCarriedPerCall bounds the admissions remembered per name, key
	// and limits: beyond it, the two nearest in time (the latest and the
	// new one, or two before) merge, at the later's time, so some units
	// are charged later than they were admitted, by the least gap (which
	// denies more, never less). The admissions of a call with a limit
	// that counts calls (ratelimit.Limit.PerCall) are kept apart, within
	// MaxCarried.
	MaxCarriedPerCall = 32
)

// carryBack remembers the admissions of the local fallback; a second one,
// the fallback's ledger, what the backend admitted (see ledger.go).
type carryBack struct {
	seed   maphash.Seed
	shards [carryShards]carryShard
	// n counts the admissions remembered, over the shards; the calls that
	// the backend decides read it without a lock, to start a carry-back
	// (see carrySoon).
	n atomic.Int64
	// ledger makes it a ledger: it prunes the admissions whose windows
	// have closed, and merges a call's admissions beyond MaxCarriedPerCall
	// as mergeLedger does.
	ledger bool
	// marked counts, in a ledger, the marks its fallback noted (see
	// mergeLedger).
	marked atomic.Int64
	// scheduled is set while a carry-back started by a call is on its way.
	scheduled atomic.Bool
	// dropped counts the units admitted but not carried back: beyond
	// MaxCarried, denied by the backend when carried back (its state was
	// full), or carried back without a reply (it may have charged them;
	// they are not sent twice).
	dropped atomic.Int64
	// charged counts the units carried back to the backend.
	charged atomic.Int64

	// running is held by the goroutine carrying back; pending asks it to
	// go round once more; carrying is set while it holds admissions it
	// took (they are in neither calls nor the backend yet).
	running  sync.Mutex
	pending  atomic.Bool
	carrying atomic.Bool
	// settling counts the probes waiting for other processes to carry
	// back; the breaker stays open meanwhile.
	settling atomic.Int32
}

// carryShards splits the admissions remembered by the hash of their call,
// so that calls on different keys rarely wait for each other.
const carryShards = 16

// carryShard holds the admissions of the calls whose hashes it takes.
type carryShard struct {
	mu sync.Mutex
	// calls maps the hash of a call to its admissions, chained with those
	// of any other call of the same hash.
	calls map[uint64]*carried
	_     [48]byte // keep shards on separate cache lines
}

// carried is what the fallback admitted of one name, key and limits: units
// admitted at times (µs on the backend's clock), oldest first.
type carried struct {
	req ratelimit.Request
	// only lists the limits of req to charge, nil meaning all: a charge
	// of some limits of a call with a key per limit that the backend
	// could not be asked about is remembered without the others.
	only  []int
	at    []int64
	units []int64
	// next is the next call of the same hash, if any.
	next *carried
	// span is, in a ledger, how long (µs) an admission weighs at most
	// (see spanOf); mark, how many marks the ledger had noted when its
	// latest admission was recorded (see mergeLedger).
	span, mark int64
}

func newCarryBack() *carryBack {
	c := &carryBack{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].calls = map[uint64]*carried{}
	}
	return c
}

// hashOf returns the hash of req's name, key or keys, lines and limits,
// and of only: the shard and slot of its admissions.
func (c *carryBack) hashOf(req *ratelimit.Request, only []int) uint64 {
	h := mix(maphash.String(c.seed, req.Name) ^ maphash.String(c.seed, req.Key)>>1)
	for _, k := range req.Keys {
		h = mix(h ^ maphash.String(c.seed, k))
	}
	for _, name := range req.Shared {
		h = mix(h ^ maphash.String(c.seed, name))
	}
	for _, lim := range req.Limits {
		h = mix(mix(h^uint64(lim.Period)) ^ uint64(lim.Threshold))
	}
	for _, i := range only {
		h = mix(h ^ uint64(i))
	}
	return h
}

// mix scrambles h, so that the order of what is hashed matters.
func mix(h uint64) uint64 {
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29
}

// is reports whether e holds the admissions of req's name, key or keys,
// lines and limits, charged to only.
func (e *carried) is(req *ratelimit.Request, only []int) bool {
	if e.req.Name != req.Name || e.req.Key != req.Key || len(e.req.Limits) != len(req.Limits) ||
		len(e.req.Keys) != len(req.Keys) || len(e.req.Shared) != len(req.Shared) || len(e.only) != len(only) {
		return false
	}
	for i := range req.Limits {
		if e.req.Limits[i] != req.Limits[i] {
			return false
		}
	}
	for i := range req.Keys {
		if e.req.Keys[i] != req.Keys[i] {
			return false
		}
	}
	for i := range req.Shared {
		if e.req.Shared[i] != req.Shared[i] {
			return false
		}
	}
	for i := range only {
		if e.only[i] != only[i] {
			return false
		}
	}
	return true
}

// record remembers that the fallback admitted req at now, to charge to
// its limits in only (nil: all).
func (c *carryBack) record(req *ratelimit.Request, only []int, now int64) {
	units := req.Units()
	h := c.hashOf(req, only)
	s := &c.shards[h%carryShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.calls[h]
	for e != nil && !e.is(req, only) {
		e = e.next
	}
	if e != nil && c.ledger {
		c.n.Add(-int64(e.dropClosed(now)))
	}
	if e != nil && len(e.at) >= MaxCarriedPerCall && !countsCalls(e.req.Limits) {
		if c.ledger {
			mergeLedger(e, now, units, c.marked.Load())
			return
		}
		mergeNearest(e, now, units)
		return
	}
	if c.n.Add(1) > MaxCarried {
		c.n.Add(-1)
		c.dropped.Add(units)
		return
	}
	if e == nil {
		e = &carried{req: ratelimit.Request{Name: req.Name, Key: strings.Clone(req.Key), Keys: slices.Clone(req.Keys),
			Shared: slices.Clone(req.Shared), Limits: slices.Clone(req.Limits)}, only: only, next: s.calls[h]}
		if c.ledger {
			e.span = spanOf(req.Limits)
		}
		s.calls[h] = e
	}
	e.at = append(e.at, now)
	e.units = append(e.units, units)
	if c.ledger {
		e.mark = c.marked.Load()
	}
}

// countsCalls reports whether one of limits counts calls
// (ratelimit.Limit.PerCall): admissions of its calls are never merged,
// since such a limit takes 1 of each admission carried back, whatever its
// units.
func countsCalls(limits []ratelimit.Limit) bool {
	for _, l := range limits {
		if l.PerCall {
			return true
		}
	}
	return false
}

// filter keeps the calls of s for which keep reports true, and forgets
// the others; it returns how many admissions it forgot. s is locked.
func (s *carryShard) filter(keep func(e *carried) bool) int64 {
	var gone int64
	for h, head := range s.calls {
		p := &head
		for *p != nil {
			if keep(*p) {
				p = &(*p).next
				continue
			}
			gone += int64(len((*p).at))
			*p = (*p).next
		}
		if head == nil {
			delete(s.calls, h)
		} else {
			s.calls[h] = head
		}
	}
	return gone
}

// forget forgets the admissions of name and key (of calls with a key per
// limit, those with key among their keys).
func (c *carryBack) forget(name, key string) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		c.n.Add(-s.filter(func(e *carried) bool {
			return e.req.Name != name || !(e.req.Keys == nil && e.req.Key == key || slices.Contains(e.req.Keys, key))
		}))
		s.mu.Unlock()
	}
}

// size returns how many admissions are remembered.
func (c *carryBack) size() int { return int(c.n.Load()) }

// admissions appends to out e's admissions that weigh after since: all,
// but in a ledger, whose admissions weigh e.span.
func (e *carried) admissions(out []Admission, since int64) []Admission {
	for i, at := range e.at {
		if at+e.span <= since {
			continue
		}
		req := e.req
		req.Cost = e.units[i]
		out = append(out, Admission{Req: req, Only: e.only, At: time.UnixMicro(at)})
	}
	return out
}

// take returns every admission remembered, and forgets them.
func (c *carryBack) take() []Admission {
	var out []Admission
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n := len(out)
		for _, e := range s.calls {
			for ; e != nil; e = e.next {
				out = e.admissions(out, math.MinInt64)
			}
		}
		s.calls = map[uint64]*carried{}
		s.mu.Unlock()
		c.n.Add(-int64(len(out) - n))
	}
	return out
}

// Held returns how many admissions of the fallback wait to be carried
// back.
func (f *Fallback) Held() int { return f.carry.size() }

// Carried returns the units carried back to the backend so far, and those
// admitted but not carried back (see [CarryResult]).
func (f *Fallback) Carried() (charged, dropped int64) {
	return f.carry.charged.Load(), f.carry.dropped.Load()
}

// Carrying reports whether a carry-back that a call started is on its
// way.
func (f *Fallback) Carrying() bool { return f.carry.scheduled.Load() }

// Remember remembers that the fallback admitted req at at, to be carried
// back, as AllowLocal does for the calls it admits.
func (f *Fallback) Remember(req ratelimit.Request, at time.Time) {
	f.carry.record(&req, nil, at.UnixMicro())
}

// carrySoon starts a carry-back on a goroutine of its own, unless one is
// on its way, when the backend has decided a call and the fallback's
// admissions wait to be carried back while no breaker is open (an open
// one's probe carries them back, a node's too): when breakers are off (no
// probe carries them back), or when the fallback decided a few calls that
// failed without opening a breaker. It costs a decided call one atomic
// load and never blocks it; the backend may decide calls before the
// charges arrive (a round trip or so).
func (f *Fallback) carrySoon() {
	c := f.carry
	if c.n.Load() == 0 || f.circuitOpen() || !c.scheduled.CompareAndSwap(false, true) {
		return
	}
	f.bg.spawn(func(ctx context.Context) {
		defer c.scheduled.Store(false)
		ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
		defer cancel()
		f.CarryBack(ctx)
	})
}

// CarryBack charges to the backend what the fallback admitted in windows
// still open. It runs on a goroutine of a breaker or of carrySoon (never
// a caller's): when a probe finds the backend back, before the breaker
// closes, so that the backend decides no call before it has the
// fallback's charges, and again once the breaker closed, for what the
// fallback admitted meanwhile; and after the backend decided a call while
// admissions wait without an open breaker. One goroutine carries back at
// a time; a call while it runs makes it go round once more.
func (f *Fallback) CarryBack(ctx context.Context) {
	c := f.carry
	if f.carrier == nil {
		return
	}
	c.pending.Store(true)
	for c.pending.Load() {
		if !c.running.TryLock() {
			return // the goroutine carrying back goes round again
		}
		c.pending.Store(false)
		if c.size() > 0 {
			c.carrying.Store(true)
			f.carryRound(ctx)
			c.carrying.Store(false)
		}
		c.running.Unlock()
	}
}

// carryRound charges every admission remembered, and remembers again those
// that the backend could not be asked about.
func (f *Fallback) carryRound(ctx context.Context) {
	c := f.carry
	taken := c.take()
	res := f.carrier.Carry(ctx, taken)
	c.charged.Add(res.Charged)
	c.dropped.Add(res.Dropped)
	for _, a := range res.Kept {
		c.record(&a.Req, a.Only, a.At.UnixMicro())
	}
	f.ledger.carried(taken, res.Kept)
}

// Recover carries back the ledger if the backend lost its state, and what
// the fallback admitted, then, before the breaker closes, waits for the
// other processes (see awaitFleet), during which the fallback still
// decides, so that their probes find the backend back too and carry back
// theirs before this one lets the backend decide, and carries back what
// the fallback admitted meanwhile. A [Breaker] around f calls it when its
// probe finds the backend back, before it closes (bounded by a timeout),
// and again on a goroutine of its own a little after it closed; wait is
// the breaker's longest backoff, within which the other processes'
// probes find it back too.
func (f *Fallback) Recover(ctx context.Context, wait time.Duration) {
	lost, _ := f.CheckMarks(ctx)
	c := f.carry
	// A carry-back on its way (started by a call, see carrySoon) holds
	// admissions it took: wait for it to charge them or keep them again.
	for c.carrying.Load() && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	since, open := f.openedAt()
	if !open {
		// Told again a little after the breaker closed: the fallback
		// decides again from now on (for the next outage).
		f.rejoining.Store(false)
	}
	rejoins := open && f.rejoins()
	if c.size() == 0 && !lost && !rejoins {
		return
	}
	c.settling.Add(1)
	defer c.settling.Add(-1)
	f.CarryBack(ctx)
	if rejoins {
		// Shed from now until a little after the breaker closes (see
		// above): an admission then would reach the backend after the
		// processes that closed theirs decide there. What the fallback
		// admitted before is carried back before this process says it is
		// back: the others close their breakers once it has.
		f.rejoining.Store(true)
		f.admitting.Lock() // for the decisions that looked before
		f.admitting.Unlock()
		f.CarryBack(ctx)
	}
	f.awaitFleet(ctx, wait, since, rejoins)
	f.deciding.Store(false)
	for range 2 {
		if c.size() == 0 || ctx.Err() != nil {
			return
		}
		f.CarryBack(ctx)
	}
}

// openedAt returns when the earliest breaker around f that is open now
// opened, and whether one is.
func (f *Fallback) openedAt() (time.Time, bool) {
	b := f.breaker.Load()
	if b == nil {
		return time.Time{}, false
	}
	var since time.Time
	for _, at := range b.Circuits() {
		if since.IsZero() || at.Before(since) {
			since = at
		}
	}
	return since, !since.IsZero()
}

// awaitFleet waits until every process of the fleet, as the heartbeat
// counted it before the outage, has found the backend back since its
// breaker opened at since (it marked itself back since then:
// [Heartbeater.Rejoin]), polling every rejoinPoll for at most
// [HeartbeatTTL]: a process that died before or during the outage is
// waited for no longer. Unless it rejoins (a fleet that rejoins,
// [FleetAbilities.Rejoins], and a breaker still open), it waits wait and
// a little more, within which the other processes' probes find the
// backend back.
func (f *Fallback) awaitFleet(ctx context.Context, wait time.Duration, since time.Time, rejoins bool) {
	if !rejoins {
		sleepCtx(ctx, wait+stragglerWait)
		return
	}
	n, member := int64(f.Processes()), f.fleet.Fleet().Member()
	for deadline := time.Now().Add(HeartbeatTTL); time.Now().Before(deadline); {
		back, err := f.rejoiner.Rejoin(ctx, member, time.Now(), since, HeartbeatTTL)
		if err == nil && back >= n {
			return
		}
		if !sleepCtx(ctx, rejoinPoll) {
			return
		}
	}
}

// AwaitFleet marks the process back, around a backend whose fleet
// rejoins ([FleetAbilities.Rejoins]), and waits until every process the
// heartbeat counts has marked itself back since since (at most
// [HeartbeatTTL], or until ctx ends): a backend that reached another
// server calls it, after CheckMarks, so that it decides no call there
// while another process still charges the server it left.
func (f *Fallback) AwaitFleet(ctx context.Context, since time.Time) {
	if f.rejoins() {
		f.awaitFleet(asBackground(ctx), 0, since, true)
	}
}

// rejoinPoll is how often a recovering fallback asks whether the other
// processes are back.
const rejoinPoll = 10 * time.Millisecond

// sleepCtx sleeps d, and reports whether ctx is still live after it.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// Recovering reports whether admissions of the fallback wait to be
// carried back, or are on their way: a breaker stays open until its probe
// carried them back: a [Breaker] around f stays open, though the backend
// answered a call, until its probe has run Recover.
func (f *Fallback) Recovering() bool {
	c := f.carry
	return c.size() > 0 || c.settling.Load() > 0 || c.carrying.Load() || f.ledger.pending() ||
		(f.rejoins() && f.deciding.Load())
}

// rejoins reports whether a breaker that closes must wait for the fleet
// first (see awaitFleet): while the fallback has decided since the last
// recovery (deciding), a call answered late must not close it, since the
// other processes may still be spending their shares.
func (f *Fallback) rejoins() bool { return f.rejoiner != nil && f.fleet != nil }
