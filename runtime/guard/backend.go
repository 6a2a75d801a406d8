package guard

import (
	"context"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// backend is what a guard wraps, with the capabilities it offers (found
// with As; nil when it offers none): the guards embed it, and its
// methods pass on, unguarded, the calls no guard intercepts.
type backend struct {
	next     ratelimit.Limiter
	reserver ratelimit.Reserver
	slots    ratelimit.SlotHolder
	resetter ratelimit.Resetter
}

// backendOf returns next and its capabilities.
func backendOf(next ratelimit.Limiter) backend {
	b := backend{next: next}
	b.reserver, _ = ratelimit.As[ratelimit.Reserver](next)
	b.slots, _ = ratelimit.As[ratelimit.SlotHolder](next)
	b.resetter, _ = ratelimit.As[ratelimit.Resetter](next)
	return b
}

// ReleaseSlot passes the call on to the backend.
func (b backend) ReleaseSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) error {
	if b.slots == nil {
		return unsupported(b.next, "hold concurrency slots")
	}
	return b.slots.ReleaseSlot(ctx, req, slot, token)
}

// RenewSlot passes the call on to the backend.
func (b backend) RenewSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (bool, error) {
	if b.slots == nil {
		return false, unsupported(b.next, "hold concurrency slots")
	}
	return b.slots.RenewSlot(ctx, req, slot, token)
}

// PeekSlot passes the call on to the backend.
func (b backend) PeekSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit) (ratelimit.Decision, int64, error) {
	if b.slots == nil {
		return ratelimit.Decision{}, 0, unsupported(b.next, "hold concurrency slots")
	}
	return b.slots.PeekSlot(ctx, req, slot)
}

// Reset passes the call on to the backend.
func (b backend) Reset(ctx context.Context, name, key string) error {
	if b.resetter == nil {
		return unsupported(b.next, "reset")
	}
	return b.resetter.Reset(ctx, name, key)
}

// HeldReserver is a backend whose reservations can weigh longer, for the
// lease guard ([Leases]): a sliding log's lease, charged at the time at,
// admits calls until a hold after it, whose own charges would weigh until
// a period after their time; a charge held that long covers them however
// the lease ends, even when it never does (the process died). The
// [ratelimit.MemoryLimiter] is one (its methods are the twins of Redis's
// scripts), and so is redislimit's backend beneath its guards.
type HeldReserver interface {
	// ReserveHeld is Reserve of req, except that the units it charges to
	// each SlidingLog limit weigh until hold past a period after the time
	// it charged them at (what else it charges weighs as Reserve's
	// does). hold is positive and at most a quarter of each SlidingLog
	// limit's period, of which req takes 2 units at least (Cost, not
	// PerCall); else it fails with ratelimit.ErrInvalidLimit.
	ReserveHeld(ctx context.Context, req ratelimit.Request, hold time.Duration) (ratelimit.Decision, time.Time, error)
	// RefundHeld takes back up to n units that ReserveHeld charged to req
	// at the time at with hold, as Adjust refunds -n units, except that
	// each SlidingLog limit gives back only units held with hold, and a
	// held charge keeps 2 units or none (a refund that would leave 1
	// leaves 2).
	RefundHeld(ctx context.Context, req ratelimit.Request, at time.Time, hold time.Duration, n int64) error
}
