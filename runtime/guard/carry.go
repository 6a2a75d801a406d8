package guard

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Carrier is a backend that can be charged what a fallback admitted while
// it could not decide, at the times it was admitted, without deciding
// anything (the carry-back; Redis's side is a script that charges a call
// at a time it is given).
type Carrier interface {
	// Carry charges each admission to the backend, to the limits of its
	// request whose windows are still open (or, as a sliding window's
	// previous window, still weigh), at its time, as much of it as fits
	// (a window is then full); what does not fit is dropped. A limit that
	// counts calls (ratelimit.Limit.PerCall) takes 1 of each admission,
	// whatever its cost. Each limit is charged where the backend keeps its
	// state (a shared line's under its own name: ratelimit.Request.Line).
	// It returns
	// what it charged and dropped, in units, and the admissions it could
	// not ask the backend about, which the fallback keeps for the next
	// time (an admission that may have been charged without a reply is
	// dropped, never sent twice).
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
	// and limits: beyond it, an admission is added to the call's latest
	// one, whose time becomes its own, so the units are charged later
	// than they were admitted (which denies more, never less). The
	// admissions of a call with a limit that counts calls
	// (ratelimit.Limit.PerCall) are kept apart, within MaxCarried.
	MaxCarriedPerCall = 32
)

// carryBack remembers the admissions of the local fallback.
type carryBack struct {
	mu    sync.Mutex
	calls map[string]*carried
	n     int // admissions remembered
	// held is n, read without the lock by the calls that the backend
	// decides, to start a carry-back (see carrySoon).
	held atomic.Int64
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
}

func newCarryBack() *carryBack { return &carryBack{calls: map[string]*carried{}} }

// callID names req's name, key and limits, and those of them to charge.
func callID(req *ratelimit.Request, only []int) string {
	var b strings.Builder
	for _, i := range only {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(',')
	}
	b.WriteString(req.Name)
	b.WriteByte(0)
	b.WriteString(req.Key)
	for _, k := range req.Keys {
		b.WriteByte(1)
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	for _, name := range req.Shared {
		b.WriteByte(2)
		b.WriteString(strconv.Itoa(len(name)))
		b.WriteByte(':')
		b.WriteString(name)
	}
	for _, lim := range req.Limits {
		b.WriteByte(0)
		b.WriteString(string(lim.AlgorithmOrDefault()))
		if lim.Calendar != "" {
			b.WriteString(" " + lim.Calendar + " " + lim.TZ)
		}
		for _, v := range []int64{int64(lim.Period), lim.Threshold, lim.MaxCost()} {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	return b.String()
}

// record remembers that the fallback admitted req at now, to charge to
// its limits in only (nil: all).
func (c *carryBack) record(req *ratelimit.Request, only []int, now int64) {
	units := req.Units()
	id := callID(req, only)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.calls[id]
	switch {
	case e != nil && len(e.at) >= MaxCarriedPerCall && !countsCalls(e.req.Limits):
		last := len(e.at) - 1
		e.at[last] = max(e.at[last], now)
		e.units[last] += units
		return
	case c.n >= MaxCarried:
		c.dropped.Add(units)
		return
	case e == nil:
		e = &carried{req: ratelimit.Request{Name: req.Name, Key: req.Key, Keys: req.Keys, Shared: req.Shared, Limits: append([]ratelimit.Limit(nil), req.Limits...)}, only: only}
		c.calls[id] = e
	}
	e.at = append(e.at, now)
	e.units = append(e.units, units)
	c.n++
	c.held.Store(int64(c.n))
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

// forget forgets the admissions of name and key (of calls with a key per
// limit, those with key among their keys).
func (c *carryBack) forget(name, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.calls {
		if e.req.Name == name && (e.req.Keys == nil && e.req.Key == key || slices.Contains(e.req.Keys, key)) {
			c.n -= len(e.at)
			c.held.Store(int64(c.n))
			delete(c.calls, id)
		}
	}
}

// size returns how many admissions are remembered.
func (c *carryBack) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// take returns every admission remembered, and forgets them.
func (c *carryBack) take() []Admission {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Admission
	for _, e := range c.calls {
		for i, at := range e.at {
			req := e.req
			req.Cost = e.units[i]
			out = append(out, Admission{Req: req, Only: e.only, At: time.UnixMicro(at)})
		}
	}
	c.calls, c.n = map[string]*carried{}, 0
	c.held.Store(0)
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
	if c.held.Load() == 0 || f.circuitOpen() || !c.scheduled.CompareAndSwap(false, true) {
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
	res := f.carrier.Carry(ctx, c.take())
	c.charged.Add(res.Charged)
	c.dropped.Add(res.Dropped)
	for _, a := range res.Kept {
		c.record(&a.Req, a.Only, a.At.UnixMicro())
	}
}

// Recover carries back what the fallback admitted, then, before the
// breaker closes, waits for the other processes (see awaitFleet), during
// which the fallback still decides, so that their probes find the backend
// back too and carry back theirs before this one lets the backend decide,
// and carries back what the fallback admitted meanwhile. See [Recoverer].
func (f *Fallback) Recover(ctx context.Context, wait time.Duration) {
	c := f.carry
	// A carry-back on its way (started by a call, see carrySoon) holds
	// admissions it took: wait for it to charge them or keep them again.
	for c.carrying.Load() && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	since, open := f.openedAt()
	rejoins := open && f.rejoiner != nil && f.fleet != nil
	if c.size() == 0 && !rejoins {
		return
	}
	c.settling.Add(1)
	defer c.settling.Add(-1)
	f.CarryBack(ctx)
	f.awaitFleet(ctx, wait, since, rejoins)
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
// breaker opened at since (its heartbeat renewed since then, [Rejoiner]),
// polling every rejoinPoll for at most [HeartbeatTTL]: a process that died
// before or during the outage is waited for no longer. Unless it rejoins
// (a Rejoiner fleet, a breaker still open), it waits wait and a little
// more, within which the other processes' probes find the backend back.
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
// carried them back. See [Recoverer].
func (f *Fallback) Recovering() bool {
	c := f.carry
	return c.size() > 0 || c.settling.Load() > 0 || c.carrying.Load()
}
