package ratelimit

import (
	"context"
	"time"
)

// The functions of this file are the core's calls of [Limiter.Do], one
// per operation, typed.

// reserve asks limiter to decide and charge req (OpReserve).
func reserve(ctx context.Context, limiter Limiter, req Request) (Decision, time.Time, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpReserve, Request: req})
	return res.Decision, res.At, err
}

// adjust changes the charge of req, reserved at at, by delta (OpAdjust).
func adjust(ctx context.Context, limiter Limiter, req Request, at time.Time, delta int64) error {
	_, err := limiter.Do(ctx, Op{Kind: OpAdjust, Request: req, At: at, Units: delta})
	return err
}

// takeSlot decides req's rate limits and a slot under token (OpTakeSlot).
func takeSlot(ctx context.Context, limiter Limiter, req Request, slot Limit, token string) (Decision, time.Time, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpTakeSlot, Request: req, Slot: slot, Token: token})
	return res.Decision, res.At, err
}

// renewSlot renews the lease of the slot held under token (OpRenewSlot).
func renewSlot(ctx context.Context, limiter Limiter, req Request, slot Limit, token string) (bool, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpRenewSlot, Request: req, Slot: slot, Token: token})
	return res.Held, err
}

// giveSlot gives back the slot held under token (OpGiveSlot).
func giveSlot(ctx context.Context, limiter Limiter, req Request, slot Limit, token string) error {
	_, err := limiter.Do(ctx, Op{Kind: OpGiveSlot, Request: req, Slot: slot, Token: token})
	return err
}

// peekSlotOf asks what OpTakeSlot would decide now, and the slots held.
func peekSlotOf(ctx context.Context, limiter Limiter, req Request, slot Limit) (Decision, int64, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpPeekSlot, Request: req, Slot: slot})
	return res.Decision, res.Count, err
}

// turn decides req in its turn (OpTurn).
func turn(ctx context.Context, limiter Limiter, req Request, ticket int64, wait time.Duration) (Decision, int64, time.Time, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpTurn, Request: req, Ticket: ticket, Wait: wait})
	return res.Decision, res.Ticket, res.At, err
}

// slotTurn takes a slot in req's turn (OpSlotTurn).
func slotTurn(ctx context.Context, limiter Limiter, req Request, slot Limit, token string, ticket int64, wait time.Duration) (Decision, int64, time.Time, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpSlotTurn, Request: req, Slot: slot, Token: token, Ticket: ticket, Wait: wait})
	return res.Decision, res.Ticket, res.At, err
}

// waiting returns how many calls wait in req's queue, and when the last
// is due back (OpWaiting).
func waiting(ctx context.Context, limiter Limiter, req Request) (int, time.Duration, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpWaiting, Request: req})
	return int(res.Count), res.Left, err
}

// cooling returns the line of req that cools longest, and for how long
// (OpCooling).
func coolingOf(ctx context.Context, limiter Limiter, req Request) (int, time.Duration, error) {
	res, err := limiter.Do(ctx, Op{Kind: OpCooling, Request: req})
	return res.Line, res.Left, err
}

// can reports whether limiter carries out k.
func can(limiter Limiter, k OpKind) bool { return limiter.Abilities().Can(k) }
