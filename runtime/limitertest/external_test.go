package limitertest_test

import (
	"context"
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

// The capabilities forwarding offers, which the compiler checks.
var (
	_ ratelimit.Configured = forwarding{}
	_ ratelimit.Peeker     = forwarding{}
	_ ratelimit.Resetter   = forwarding{}
	_ ratelimit.Reserver   = forwarding{}
	_ ratelimit.SlotHolder = forwarding{}
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

// TestGuardedForwardingBackend runs the suite on the forwarding backend
// behind every guard of package guard (a deny cache that holds denials as
// long as they last, the breaker and the local fallback): they change no
// decision of a backend of another package.
func TestGuardedForwardingBackend(t *testing.T) {
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			l := guard.Wrap(forwarding{ratelimit.NewMemory(opts...)}, guard.WithDenyCache(64), guard.WithDenyHold(time.Hour))
			t.Cleanup(func() { guard.Close(l) })
			return l
		},
		Clock: true,
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
