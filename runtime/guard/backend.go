package guard

import (
	"context"

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
