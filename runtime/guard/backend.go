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
	a := next.Abilities()
	if a.Can(ratelimit.OpReserve) && a.Can(ratelimit.OpAdjust) {
		b.reserver = &nextOps{next}
	}
	if a.Can(ratelimit.OpTakeSlot) {
		b.slots = &nextOps{next}
	}
	if a.Can(ratelimit.OpReset) {
		b.resetter = &nextOps{next}
	}
	return b
}

// Abilities reports the wrapped limiter's. See [ratelimit.Limiter].
func (b *backend) Abilities() ratelimit.Abilities { return b.next.Abilities() }

// do carries out op with the guard's handlers, or passes it on.
func (b *backend) do(ctx context.Context, g ratelimit.Limiter, op ratelimit.Op) (ratelimit.Result, error) {
	return b.ops.Do(ctx, g, op)
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
