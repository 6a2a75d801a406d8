package limitertest_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitertest"
)

// forwarding is a backend written outside package ratelimit with its
// exported API only: a limiter that is not a *MemoryLimiter (nor a
// ratelimit.Wrapper, so the core cannot reach past it) and offers every
// capability by forwarding to one.
type forwarding struct{ m *ratelimit.MemoryLimiter }

func (f forwarding) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return f.m.Allow(ctx, req)
}

func (f forwarding) Config() *ratelimit.Config { return f.m.Config() }

func (f forwarding) Peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return f.m.Peek(ctx, req)
}

func (f forwarding) Reset(ctx context.Context, name, key string) error {
	return f.m.Reset(ctx, name, key)
}

func (f forwarding) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	return f.m.Reserve(ctx, req)
}

func (f forwarding) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	return f.m.Adjust(ctx, req, at, delta)
}

// ReserveHeld and RefundHeld make it a guard.HeldReserver: a sliding
// log's lease is charged to weigh as long as the calls it admits.
func (f forwarding) ReserveHeld(ctx context.Context, req ratelimit.Request, hold time.Duration) (ratelimit.Decision, time.Time, error) {
	return f.m.ReserveHeld(ctx, req, hold)
}

func (f forwarding) RefundHeld(ctx context.Context, req ratelimit.Request, at time.Time, hold time.Duration, n int64) error {
	return f.m.RefundHeld(ctx, req, at, hold, n)
}

func (f forwarding) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	return f.m.ReserveSlot(ctx, req, slot, token)
}

func (f forwarding) ReleaseSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) error {
	return f.m.ReleaseSlot(ctx, req, slot, token)
}

func (f forwarding) RenewSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (bool, error) {
	return f.m.RenewSlot(ctx, req, slot, token)
}

func (f forwarding) PeekSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit) (ratelimit.Decision, int64, error) {
	return f.m.PeekSlot(ctx, req, slot)
}

// CountDenial and TopDenied forward to the memory limiter's summary.
func (f forwarding) CountDenial(name, key string, hashed bool) { f.m.CountDenial(name, key, hashed) }

func (f forwarding) TopDenied(ctx context.Context, n int) ([]ratelimit.DeniedKey, error) {
	return f.m.TopDenied(ctx, n)
}

// Cool and Cooling forward to the memory limiter's cooldowns.
func (f forwarding) Cool(ctx context.Context, req ratelimit.Request, i int, d time.Duration) error {
	return f.m.Cool(ctx, req, i, d)
}

func (f forwarding) Cooling(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	return f.m.Cooling(ctx, req)
}

// AllowInTurn, ReserveSlotInTurn, Dequeue and Waiting forward to the memory limiter's queues.
func (f forwarding) AllowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	return f.m.AllowInTurn(ctx, req, ticket, wait)
}

func (f forwarding) ReserveSlotInTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	return f.m.ReserveSlotInTurn(ctx, req, slot, token, ticket, wait)
}

func (f forwarding) Dequeue(ctx context.Context, req ratelimit.Request, ticket int64) error {
	return f.m.Dequeue(ctx, req, ticket)
}

func (f forwarding) Waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	return f.m.Waiting(ctx, req)
}

// SharesLines: Allow forwards Request.Shared to the memory limiter,
// which keeps each line's state where Request.Line says.
func (f forwarding) SharesLines() {}

// The capabilities forwarding offers, which the compiler checks.
var (
	_ ratelimit.Configured    = forwarding{}
	_ ratelimit.Peeker        = forwarding{}
	_ ratelimit.LineSharer    = forwarding{}
	_ ratelimit.DenialCounter = forwarding{}
	_ ratelimit.Resetter      = forwarding{}
	_ ratelimit.Reserver      = forwarding{}
	_ ratelimit.SlotHolder    = forwarding{}
	_ ratelimit.Cooler        = forwarding{}
	_ ratelimit.Queuer        = forwarding{}
	_ guard.HeldReserver      = forwarding{}
)

// TestForwardingBackend runs the suite on a backend of another package
// that offers every capability.
func TestForwardingBackend(t *testing.T) {
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			return forwarding{ratelimit.NewMemory(opts...)}
		},
		Clock: true,
	})
}

// errDown is the failure of an outage of an outage-prone backend.
var errDown = errors.New("limitertest_test: the backend is down")

// outageProne is the forwarding backend with what package guard's breaker
// and fallback need of it (guard.Probed, guard.Carrier), failing every
// call while down, as a backend out of reach does; it keeps its state.
type outageProne struct {
	forwarding
	down *atomic.Bool
}

func (o outageProne) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if o.down.Load() {
		return ratelimit.Decision{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.Allow(ctx, req)
}

func (o outageProne) AllowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	if o.down.Load() {
		return ratelimit.Decision{}, 0, time.Time{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.AllowInTurn(ctx, req, ticket, wait)
}

func (o outageProne) ReserveSlotInTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	if o.down.Load() {
		return ratelimit.Decision{}, 0, time.Time{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.ReserveSlotInTurn(ctx, req, slot, token, ticket, wait)
}

func (o outageProne) Dequeue(ctx context.Context, req ratelimit.Request, ticket int64) error {
	if o.down.Load() {
		return &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.Dequeue(ctx, req, ticket)
}

func (o outageProne) Waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	if o.down.Load() {
		return 0, 0, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.Waiting(ctx, req)
}

func (o outageProne) Cool(ctx context.Context, req ratelimit.Request, i int, d time.Duration) error {
	if o.down.Load() {
		return &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.Cool(ctx, req, i, d)
}

func (o outageProne) Cooling(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	if o.down.Load() {
		return -1, 0, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.Cooling(ctx, req)
}

func (o outageProne) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	if o.down.Load() {
		return ratelimit.Decision{}, time.Time{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.Reserve(ctx, req)
}

// ReserveHeld and RefundHeld fail while down, as Reserve and Adjust do.
func (o outageProne) ReserveHeld(ctx context.Context, req ratelimit.Request, hold time.Duration) (ratelimit.Decision, time.Time, error) {
	if o.down.Load() {
		return ratelimit.Decision{}, time.Time{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.ReserveHeld(ctx, req, hold)
}

func (o outageProne) RefundHeld(ctx context.Context, req ratelimit.Request, at time.Time, hold time.Duration, n int64) error {
	if o.down.Load() {
		return &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.RefundHeld(ctx, req, at, hold, n)
}

// Adjust fails while down, so a settle or a refund then fails with
// ratelimit.ErrBackend, giving nothing back.
func (o outageProne) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if o.down.Load() {
		return &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return o.forwarding.Adjust(ctx, req, at, delta)
}

func (o outageProne) Node() string { return "outage-prone" }

func (o outageProne) Probe(context.Context) error {
	if o.down.Load() {
		return errDown
	}
	return nil
}

func (o outageProne) Unavailable(err error) bool { return errors.Is(err, errDown) }

// Carry charges what a fallback admitted on top of a reservation made at
// its time (ratelimit.Reserver's Adjust), deciding nothing: its cost to
// the limits that take it, and 1 call to those that count calls
// (ratelimit.Limit.PerCall), which an Adjust of its cost leaves as they
// are; of an admission with a key per limit, only the limits it lists
// (guard.Admission's Only), each where the backend keeps its state (its
// own key, a shared line's under its own name: ratelimit.Request.Line).
func (o outageProne) Carry(ctx context.Context, admissions []guard.Admission) guard.CarryResult {
	var res guard.CarryResult
	for _, a := range admissions {
		switch {
		case o.down.Load():
			res.Kept = append(res.Kept, a)
		case o.carry(ctx, a) != nil:
			res.Dropped += a.Req.Cost
		default:
			res.Charged += a.Req.Cost
		}
	}
	return res
}

// carry charges a's cost, and its call to the limits that count calls.
func (o outageProne) carry(ctx context.Context, a guard.Admission) error {
	if req, ok := chargedOf(a, false); ok {
		if err := o.forwarding.Adjust(ctx, req, a.At, a.Req.Cost); err != nil {
			return err
		}
	}
	if req, ok := chargedOf(a, true); ok {
		req.Cost = 1
		return o.forwarding.Adjust(ctx, req, a.At, 1)
	}
	return nil
}

// chargedOf returns a's request with only the limits of a.Only (all, when
// nil) that count calls (perCall) or that take the cost (!perCall) left
// to charge: every other is marked as counting calls, which an Adjust
// leaves as it is. ok is false when none is left.
func chargedOf(a guard.Admission, perCall bool) (req ratelimit.Request, ok bool) {
	req = a.Req
	req.Limits, req.Rule = make([]ratelimit.Limit, len(a.Req.Limits)), nil
	for i, lim := range a.Req.Limits {
		charge := lim.PerCall == perCall && (a.Only == nil || slices.Contains(a.Only, i))
		ok = ok || charge
		lim.PerCall = !charge
		req.Limits[i] = lim
	}
	return req, ok
}

// TopDenied fails as every call does while the backend is down; the
// denials counted meanwhile (CountDenial never blocks) are listed once
// it is back.
func (o outageProne) TopDenied(ctx context.Context, n int) ([]ratelimit.DeniedKey, error) {
	if o.down.Load() {
		return nil, &ratelimit.BackendError{Name: "top denied", Err: errDown}
	}
	return o.forwarding.TopDenied(ctx, n)
}

var (
	_ guard.Probed            = outageProne{}
	_ guard.Carrier           = outageProne{}
	_ ratelimit.LineSharer    = outageProne{}
	_ ratelimit.DenialCounter = outageProne{}
)

// TestGuardedForwardingBackend runs the suite on the forwarding backend
// behind every guard of package guard (a deny cache that holds denials as
// long as they last, the breaker and the local fallback): they change no
// decision of a backend of another package. Its real outages take every
// limiter of the run down; they come back with their state.
func TestGuardedForwardingBackend(t *testing.T) {
	var down atomic.Bool
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			backend := outageProne{forwarding{ratelimit.NewMemory(opts...)}, &down}
			l := guard.Wrap(backend, guard.WithDenyCache(64), guard.WithDenyHold(time.Hour), guard.WithFallbackProcesses(1))
			t.Cleanup(func() { guard.Close(l) })
			return l
		},
		Clock: true,
		Outage: func(t *testing.T) func() {
			down.Store(true)
			t.Cleanup(func() { down.Store(false) })
			return func() { down.Store(false) }
		},
	})
}

// allowOnly is a backend of another package that offers Allow alone: the
// suite skips what needs more (Peek, Reset, reservations, slots and
// overrides, which need a ratelimit.Configured limiter).
type allowOnly struct{ m *ratelimit.MemoryLimiter }

func (a allowOnly) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return a.m.Allow(ctx, req)
}

// TestAllowOnlyBackend runs the suite on a backend that can only decide
// calls, which skips the crosses of the capabilities it lacks.
func TestAllowOnlyBackend(t *testing.T) {
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			return allowOnly{ratelimit.NewMemory(opts...)}
		},
		Clock: true,
	})
}
