package guard

import (
	"context"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// backend is what a guard wraps, with the operations it carries out as
// typed calls (nil when it does not carry them out): the guards embed
// it.
type backend struct {
	next     ratelimit.Limiter
	ops      ratelimit.Handlers // the guard's: what it intercepts, and next
	reserver *nextOps           // OpReserve and OpAdjust
	slots    *nextOps           // the slot operations
	resetter *nextOps           // OpReset
}

// backendOf returns next and what it carries out.
func backendOf(next ratelimit.Limiter) backend {
	b := backend{next: next, ops: ratelimit.Handlers{Next: next}}
	a, calls := next.Abilities(), &nextOps{next}
	if a.Can(ratelimit.OpReserve) && a.Can(ratelimit.OpAdjust) {
		b.reserver = calls
	}
	if a.Can(ratelimit.OpTakeSlot) {
		b.slots = calls
	}
	if a.Can(ratelimit.OpReset) {
		b.resetter = calls
	}
	return b
}

// Abilities reports the wrapped limiter's. See [ratelimit.Limiter].
func (b *backend) Abilities() ratelimit.Abilities { return b.next.Abilities() }

// do carries out op with the guard's handlers, or passes it on.
func (b *backend) do(ctx context.Context, g ratelimit.Limiter, op ratelimit.Op) (ratelimit.Result, error) {
	return b.ops.Do(ctx, g, &op)
}

// nextOps calls the operations of the limiter a guard wraps, typed.
type nextOps struct{ l ratelimit.Limiter }

// Reserve is OpReserve.
func (n *nextOps) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	res, err := n.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpReserve, Request: req})
	return res.Decision, res.At, err
}

// Adjust is OpAdjust.
func (n *nextOps) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	_, err := n.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpAdjust, Request: req, At: at, Units: delta})
	return err
}

// ReserveSlot is OpTakeSlot.
func (n *nextOps) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	res, err := n.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTakeSlot, Request: req, Slot: slot, Token: token})
	return res.Decision, res.At, err
}

// Reset is OpReset.
func (n *nextOps) Reset(ctx context.Context, name, key string) error {
	_, err := n.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpReset, Request: ratelimit.Request{Name: name, Key: key}})
	return err
}

// Peek is OpPeek.
func (n *nextOps) Peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	res, err := n.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpPeek, Request: req})
	return res.Decision, err
}

// ReserveHeld is OpReserveHeld.
func (n *nextOps) ReserveHeld(ctx context.Context, req ratelimit.Request, hold time.Duration) (ratelimit.Decision, time.Time, error) {
	res, err := n.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpReserveHeld, Request: req, Hold: hold})
	return res.Decision, res.At, err
}

// RefundHeld is OpRefundHeld.
func (n *nextOps) RefundHeld(ctx context.Context, req ratelimit.Request, at time.Time, hold time.Duration, units int64) error {
	_, err := n.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpRefundHeld, Request: req, At: at, Hold: hold, Units: units})
	return err
}
