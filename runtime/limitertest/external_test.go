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
// exported API only: a limiter that is not a *MemoryLimiter and carries
// out every operation by forwarding to one (its plan is the memory
// limiter's, not its own, so its calls are decided through its Allow).
type forwarding struct{ m *ratelimit.MemoryLimiter }

func (f forwarding) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return f.m.Allow(ctx, req)
}

func (f forwarding) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return f.m.Do(ctx, op)
}

func (f forwarding) Abilities() ratelimit.Abilities { return f.m.Abilities() }

// TestForwardingBackend runs the suite on a backend of another package
// that offers every capability.
func TestForwardingBackend(t *testing.T) {
	t.Parallel() // the suite waits on real time more than it computes
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

// Do fails while down, as every call to a backend out of reach does,
// but for the operations that never leave the process (a plan, a denial
// counted).
func (o outageProne) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	if o.down.Load() && op.Kind != ratelimit.OpPlan && op.Kind != ratelimit.OpCountDenial {
		return ratelimit.Result{}, &ratelimit.BackendError{Name: op.Request.Name, Err: errDown}
	}
	return o.forwarding.Do(ctx, op)
}

// Abilities reports the forwarding backend's, offering the guards o (a
// guard.Probed and a guard.Carrier).
func (o outageProne) Abilities() ratelimit.Abilities {
	a := o.forwarding.Abilities()
	a.ForGuards = o
	return a
}

func (o outageProne) Node() string { return "outage-prone" }

func (o outageProne) Probe(context.Context) error {
	if o.down.Load() {
		return errDown
	}
	return nil
}

func (o outageProne) Unavailable(err error) bool { return errors.Is(err, errDown) }

// PerNode reports false: the backend is one node, with one breaker.
func (o outageProne) PerNode() bool { return false }

func (o outageProne) NodeOf(context.Context, ratelimit.Request, int) (string, error) {
	return "", errors.ErrUnsupported
}

func (o outageProne) ProbeNode(context.Context, string) error { return errors.ErrUnsupported }

// Carry charges what a fallback admitted on top of a reservation made at
// its time (ratelimit.OpReserve's Adjust), deciding nothing: its cost to
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
		if err := o.adjust(ctx, req, a.At, a.Req.Cost); err != nil {
			return err
		}
	}
	if req, ok := chargedOf(a, true); ok {
		req.Cost = 1
		return o.adjust(ctx, req, a.At, 1)
	}
	return nil
}

// adjust charges delta on top of req, reserved at at (OpAdjust).
func (o outageProne) adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	_, err := o.forwarding.Do(ctx, ratelimit.Op{Kind: ratelimit.OpAdjust, Request: req, At: at, Units: delta})
	return err
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

var (
	_ guard.Probed  = outageProne{}
	_ guard.Carrier = outageProne{}
)

// TestGuardedForwardingBackend runs the suite on the forwarding backend
// behind every guard of package guard (a deny cache that holds denials as
// long as they last, the breaker and the local fallback): they change no
// decision of a backend of another package. Its real outages take every
// limiter of the run down; they come back with their state.
func TestGuardedForwardingBackend(t *testing.T) {
	t.Parallel() // the suite waits on real time more than it computes
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

// allowOnly is a backend of another package that decides calls alone:
// the suite skips what needs more (Peek, Reset, reservations, slots and
// overrides, which need a Config in its Abilities).
type allowOnly struct{ m *ratelimit.MemoryLimiter }

func (a allowOnly) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return a.m.Allow(ctx, req)
}

func (a allowOnly) Do(_ context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.Unsupported(a, op.Kind)
}

func (allowOnly) Abilities() ratelimit.Abilities { return ratelimit.Abilities{} }

// TestAllowOnlyBackend runs the suite on a backend that can only decide
// calls, which skips the crosses of the capabilities it lacks.
func TestAllowOnlyBackend(t *testing.T) {
	t.Parallel() // the suite waits on real time more than it computes
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			return allowOnly{ratelimit.NewMemory(opts...)}
		},
		Clock: true,
	})
}
