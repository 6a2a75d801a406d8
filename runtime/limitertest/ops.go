package limitertest

import (
	"context"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The suite's calls of ratelimit.Limiter.Do, typed.

// topDenied lists l's n most-denied keys (OpTopDenied).
func topDenied(ctx context.Context, l ratelimit.Limiter, n int) ([]ratelimit.DeniedKey, error) {
	res, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTopDenied, Units: int64(n)})
	return res.Denied, err
}

// adjustOn changes the charge of req, reserved at at, by delta (OpAdjust).
func adjustOn(ctx context.Context, l ratelimit.Limiter, req ratelimit.Request, at time.Time, delta int64) error {
	_, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpAdjust, Request: req, At: at, Units: delta})
	return err
}

// resetKey clears the state of name and key on l (OpReset).
func resetKey(ctx context.Context, l ratelimit.Limiter, name, key string) error {
	_, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpReset, Request: ratelimit.Request{Name: name, Key: key}})
	return err
}

// opCalls are a limiter's queue and slot operations, as typed calls of its
// Do.
type opCalls struct{ l ratelimit.Limiter }

// queueOf returns l's queue operations, and whether it queues (OpTurn).
func queueOf(l ratelimit.Limiter) (opCalls, bool) { return opCalls{l}, can(l, ratelimit.OpTurn) }

// slotsOf returns l's slot operations, and whether it holds slots.
func slotsOf(l ratelimit.Limiter) (opCalls, bool) { return opCalls{l}, can(l, ratelimit.OpTakeSlot) }

// AllowInTurn is OpTurn.
func (c opCalls) AllowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	res, err := c.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTurn, Request: req, Ticket: ticket, Wait: wait})
	return res.Decision, res.Ticket, res.At, err
}

// ReserveSlotInTurn is OpSlotTurn.
func (c opCalls) ReserveSlotInTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	op := ratelimit.Op{Kind: ratelimit.OpSlotTurn, Request: req, Slot: slot, Token: token, Ticket: ticket, Wait: wait}
	res, err := c.l.Do(ctx, op)
	return res.Decision, res.Ticket, res.At, err
}

// Dequeue is OpDequeue.
func (c opCalls) Dequeue(ctx context.Context, req ratelimit.Request, ticket int64) error {
	_, err := c.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpDequeue, Request: req, Ticket: ticket})
	return err
}

// Waiting is OpWaiting.
func (c opCalls) Waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	res, err := c.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpWaiting, Request: req})
	return int(res.Count), res.Left, err
}

// ReserveSlot is OpTakeSlot.
func (c opCalls) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	res, err := c.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTakeSlot, Request: req, Slot: slot, Token: token})
	return res.Decision, res.At, err
}

// can reports whether l carries out k.
func can(l ratelimit.Limiter, k ratelimit.OpKind) bool { return l.Abilities().Can(k) }

// ReleaseSlot is OpGiveSlot.
func (c opCalls) ReleaseSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) error {
	_, err := c.l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpGiveSlot, Request: req, Slot: slot, Token: token})
	return err
}
