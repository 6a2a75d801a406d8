package guard

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Fallback is the local fallback guard: a [ratelimit.Limiter] that is the
// [ratelimit.OpFallback] of its backend, deciding in process the calls of
// [ratelimit.FailLocal] rules that the backend could not decide, against
// each process's share of their limits (see [WithFallbackProcesses]),
// and, around a [Carrier] backend, charging what it admitted to the
// backend when it answers again (the carry-back): when a [Breaker]'s probe
// finds the backend back, before the breaker closes ([Fallback.Recover]),
// and when the backend decided a call while admissions wait and no
// breaker is open. It intercepts Allow (to start that carry-back),
// OpReserve, OpAdjust, OpTakeSlot and OpReset (to forget the key's state
// in process), and passes the other operations on.
type Fallback struct {
	backend         // what it wraps, and the capabilities it offers
	carrier Carrier // nil: nothing is carried back
	// rejoiner, the backend's heartbeat when it reports Rejoins, lets a
	// recovering fallback wait for the other processes of its fleet (see
	// awaitFleet); nil otherwise.
	rejoiner Heartbeater
	// local decides in process: a memory limiter with the backend's clock
	// and key bound, and no hook (the guard reports its decisions).
	local *ratelimit.MemoryLimiter
	hook  ratelimit.Hook
	clock ratelimit.Clock
	// processes fixes the number of processes; 0: the fleet's count.
	processes int
	fleet     *FleetMember
	carry     *carryBack
	// told is what the backend last told was left of each line, which a
	// fallback that starts deciding spends only its share of.
	told   *toldLines
	ledger *ledger // nil: none (see ledger.go)
	// rejoining is set from when Recover carried back and waits for the
	// fleet until a little after the breaker closed: the fallback then
	// sheds the calls it would admit (see AllowLocal).
	rejoining atomic.Bool
	// admitting is held shared by a decision of the fallback from its
	// look at rejoining to its record of what it admitted, and alone by a
	// recovery once it set rejoining, so that the carry-back after it
	// holds every admission made before (a decision preempted in between
	// would otherwise record its admission after the fleet returned).
	admitting sync.RWMutex
	// deciding is set by a decision of the fallback, and cleared once a
	// recovery has waited for the fleet (see Recovering).
	deciding atomic.Bool
	// breaker is the breaker guard around the fallback, if any (see
	// Guarded).
	breaker atomic.Pointer[Breaker]
	bg      *background
}

// newFallback returns the fallback guard of backend, configured by the
// options of this package among opts, with the clock, key bound and hook
// of the backend's [ratelimit.Config] (that of its [ratelimit.Abilities]). Unless
// [WithFallbackProcesses] fixes the number of processes, the process of
// a backend that offers a [Heartbeater] joins its fleet ([JoinFleet]),
// whose count divides the limits; one that offers a [Carrier] is carried
// back to. Its background work runs until [Fallback.Close].
func newFallback(backend ratelimit.Limiter, opts ...Option) *Fallback {
	s := newSettings(opts)
	f := &Fallback{backend: backendOf(backend), processes: s.fallbackProcesses, carry: newCarryBack(), told: newToldLines(), bg: newBackground()}
	f.ops.Reserve, f.ops.Adjust, f.ops.TakeSlot, f.ops.Reset = f.Reserve, f.Adjust, f.ReserveSlot, f.Reset
	f.ops.Fallback = f.AllowLocal
	f.carrier, _ = offered[Carrier](backend)
	hb, beats := offered[Heartbeater](backend)
	if beats && hb.FleetAbilities().Rejoins {
		f.rejoiner = hb
	}
	var cfg ratelimit.Config
	if c := backend.Abilities().Config; c != nil {
		cfg = *c
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = ratelimit.DefaultMaxKeys
	}
	f.hook, f.clock = cfg.Hook, cfg.Clock
	f.local = ratelimit.NewMemory(ratelimit.WithClock(cfg.Clock), ratelimit.WithMaxKeys(cfg.MaxKeys))
	if beats && f.processes == 0 {
		f.fleet = JoinFleet(hb, f.down)
	}
	f.startLedger(backend)
	return f
}

// Guarded tells f the breaker guard around it: a carry-back that a call
// starts waits while a breaker of b is open (its probe carries back), and
// the heartbeat skips beats while b's breaker of the backend as a whole
// is open (the count read before the outage stands).
func (f *Fallback) Guarded(b *Breaker) { f.breaker.Store(b) }

// down reports whether the breaker of the backend as a whole is open.
func (f *Fallback) down() bool {
	b := f.breaker.Load()
	return b != nil && b.Down()
}

// circuitOpen reports whether a breaker around f is open.
func (f *Fallback) circuitOpen() bool {
	b := f.breaker.Load()
	return b != nil && b.CircuitOpen()
}

// Unwrap returns the backend.
func (f *Fallback) Unwrap() ratelimit.Limiter { return f.next }

// Carries reports whether f carries its admissions back to its backend
// (a [Carrier]).
func (f *Fallback) Carries() bool { return f.carrier != nil }

// Do decides OpFallback in process ([Fallback.AllowLocal]), answers
// OpReserve as Allow, and passes on the other operations. See
// [ratelimit.Limiter].
func (f *Fallback) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return f.do(ctx, f, op)
}

// Abilities reports the backend's, and OpFallback. See
// [ratelimit.Limiter].
func (f *Fallback) Abilities() ratelimit.Abilities {
	a := f.next.Abilities()
	a.Ops |= ratelimit.OpsOf(ratelimit.OpFallback)
	return a
}

// Close takes f out of its fleet (the last join of a process stops the
// heartbeat and removes its member) and abandons the carry-back of what
// it admitted. Close may be called more than once.
func (f *Fallback) Close() {
	if f.fleet != nil {
		f.fleet.Leave()
	}
	f.bg.close()
}

// Processes returns how many processes share the limits in the fallback:
// WithFallbackProcesses's n, else the count of processes the heartbeat
// last read, at least 1.
func (f *Fallback) Processes() int {
	if f.processes > 0 {
		return f.processes
	}
	if f.fleet == nil {
		return 1
	}
	return f.fleet.Fleet().Processes()
}

// Fleet returns the heartbeat the fallback takes part in; nil when none.
func (f *Fallback) Fleet() *Fleet {
	if f.fleet == nil {
		return nil
	}
	return f.fleet.Fleet()
}

// AllowLocal decides req in process, against each process's share of its
// limits (see [WithFallbackProcesses]), reports the decision to the hook
// as one of [ratelimit.SourceFallback], against the shares, and returns
// the shares: the limits a denied caller is told. An admitted call is
// remembered, to be charged to the backend when it answers again. See
// [ratelimit.OpFallback].
func (f *Fallback) AllowLocal(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, []ratelimit.Limit, error) {
	req.Key = callkey.Bound(req.Key) // for the hook; the fallback bounds a 97-byte stand-in again
	if req.Keys != nil {
		req.Keys = boundKeys(req.Keys)
	}
	local := req
	d, err := f.decide(ctx, &req, &local)
	if err != nil {
		return ratelimit.Decision{}, nil, err
	}
	if d.Source == ratelimit.SourceBusy {
		return d, req.Limits, nil
	}
	if f.hook != nil {
		f.decided(ctx, local, d)
	}
	// Decided in process, without waiting on the network: callers that
	// loop on such decisions would otherwise keep the breaker's probe from
	// running for seconds (measured: 2.6 to 4.8 s to see Redis back with
	// 64 goroutines per process on 2 cores), and the processes would
	// return to the backend at different times, one deciding by the
	// backend while others still spend their shares. Yielding lets the
	// probe run within a round of the runnable goroutines.
	runtime.Gosched()
	return d, local.Limits, nil
}

// decide decides req in process against this process's share of its
// limits (setting local's limits to the shares), and remembers an
// admission to be carried back; while the fallback rejoins, it sheds req.
func (f *Fallback) decide(ctx context.Context, req, local *ratelimit.Request) (d ratelimit.Decision, err error) {
	f.admitting.RLock()
	defer f.admitting.RUnlock()
	if f.rejoining.Load() {
		// Carried back and waiting for the other processes: an admission
		// now would reach the backend after processes that closed their
		// breakers decide there. Shed it; the backend decides within a
		// poll or so.
		return ratelimit.Decision{RetryAfter: rejoinPoll, Source: ratelimit.SourceBusy}, nil
	}
	if !f.deciding.Load() {
		f.deciding.Store(true)
	}
	n := f.Processes()
	if n > 1 {
		local.Limits = make([]ratelimit.Limit, len(req.Limits))
		for i, lim := range req.Limits {
			local.Limits[i] = Share(lim, n)
		}
	}
	f.told.seed(ctx, f.local, local, n, f.now())
	if d, err = f.local.Allow(ctx, *local); err != nil {
		return d, err
	}
	d.Source = ratelimit.SourceFallback
	if d.Allowed && f.carrier != nil {
		f.carry.record(req, nil, f.now())
	}
	return d, nil
}

// decided reports d, the decision of req, to the hook. It takes req by
// value, so that only a guard with a hook moves a request to the heap.
func (f *Fallback) decided(ctx context.Context, req ratelimit.Request, d ratelimit.Decision) {
	seen := ratelimit.Request{Name: req.Name, Key: req.Key, Keys: req.Keys, Shared: req.Shared, Cost: req.Cost, Limits: req.Limits, Rule: req.Rule}
	f.hook.Decided(ctx, &seen, d)
}

// now returns the time in µs of the backend's clock, or of the process's
// wall clock: the time an admission is carried back at.
func (f *Fallback) now() int64 {
	if f.clock != nil {
		return f.clock.Now().UnixMicro()
	}
	return time.Now().UnixMicro()
}

// Allow passes req on to the backend; when the backend decided it, the
// fallback remembers what it told was left of the line (see toldLines),
// and a carry-back of what the fallback admitted starts if one is due
// (see carrySoon).
func (f *Fallback) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	d, err := f.next.Allow(ctx, req)
	if err == nil {
		now := f.answeredAt()
		f.told.record(&req, &d, now)
		f.ledgerAdmitted(&req, d, now)
		f.carrySoon()
	}
	return d, err
}

// answeredAt returns the time (µs) at which the fallback records an
// answer of the backend: the ledger's time (one read of the monotonic
// clock) when it keeps a ledger, else now's.
func (f *Fallback) answeredAt() int64 {
	if f.ledger != nil {
		return f.ledgerNow()
	}
	return f.now()
}

// Reserve passes the call on to the backend, and remembers what it told
// was left of the line, as Allow does.
func (f *Fallback) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	if f.reserver == nil {
		return ratelimit.Decision{}, time.Time{}, unsupported(f.next, "reserve")
	}
	d, at, err := f.reserver.Reserve(ctx, req)
	if err == nil {
		f.told.record(&req, &d, f.now())
	}
	return d, at, err
}

// Adjust passes the call on to the backend.
func (f *Fallback) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if f.reserver == nil {
		return unsupported(f.next, "adjust")
	}
	return f.reserver.Adjust(ctx, req, at, delta)
}

// ReserveSlot passes the call on to the backend.
func (f *Fallback) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	if f.slots == nil {
		return ratelimit.Decision{}, time.Time{}, unsupported(f.next, "hold concurrency slots")
	}
	return f.slots.ReserveSlot(ctx, req, slot, token)
}

// Reset resets name and key in the backend and, once it did, forgets the
// state the fallback holds for them, and what it admitted of them that
// was to be carried back.
func (f *Fallback) Reset(ctx context.Context, name, key string) error {
	if f.resetter == nil {
		return unsupported(f.next, "reset")
	}
	if err := f.resetter.Reset(ctx, name, key); err != nil {
		return err
	}
	key = callkey.Named(key)
	f.carry.forget(name, key)
	f.ledger.forget(name, key)
	return f.local.Reset(ctx, name, key)
}

// Share returns one of n processes' share of l, as the fallback enforces
// it (see [WithFallbackProcesses]): its threshold, and its burst or
// capacity when set, divided by n, rounded down but at least 1.
func Share(l ratelimit.Limit, n int) ratelimit.Limit {
	div := func(v int64) int64 { return max(v/int64(n), 1) }
	l.Threshold = div(l.Threshold)
	if l.Burst > 0 {
		l.Burst = div(l.Burst)
	}
	if l.Capacity > 0 {
		l.Capacity = div(l.Capacity)
	}
	return l
}
