package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The guards' part in the queues of waiting calls and in cooldowns: what
// each guard does with OpTurn, OpSlotTurn, OpWaiting and OpCooling.

// errLeasedQueue declines the queue of a call with a leased line: it waits
// in its process's order, admitted from the process's leases as Allow
// admits it.
var errLeasedQueue = fmt.Errorf("guard: a call with a leased line waits in its process's order: %w", errors.ErrUnsupported)

// errOpenQueue declines OpWaiting while a breaker is open: the fallback
// decides the waiting calls, which wait in their process's order.
var errOpenQueue = fmt.Errorf("guard: while a circuit breaker is open, waiting calls wait in their process's order: %w", errors.ErrUnsupported)

// turn is OpTurn around the lease guard: declined for a call with a
// leased line (its leases admit it, as Allow does), passed on otherwise.
func (g *Leases) turn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	if g.Leased(&req) {
		return ratelimit.Decision{}, 0, time.Time{}, errLeasedQueue
	}
	res, err := g.next.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTurn, Request: req, Ticket: ticket, Wait: wait})
	return res.Decision, res.Ticket, res.At, err
}

// waiting is OpWaiting around the lease guard, declined as turn is.
func (g *Leases) waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	if g.Leased(&req) {
		return 0, 0, errLeasedQueue
	}
	res, err := g.next.Do(ctx, ratelimit.Op{Kind: ratelimit.OpWaiting, Request: req})
	return int(res.Count), res.Left, err
}

// turn is OpTurn around the breaker: while a breaker is open, the call is
// decided as a reservation (the breaker's error, or its backend's
// decision for a node still up), out of any queue.
func (g *Breaker) turn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	if g.CircuitOpen() {
		d, at, err := g.Reserve(ctx, req)
		return d, 0, at, err
	}
	res, err := g.next.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTurn, Request: req, Ticket: ticket, Wait: wait})
	return res.Decision, res.Ticket, res.At, err
}

// slotTurn is OpSlotTurn around the breaker, as turn is OpTurn.
func (g *Breaker) slotTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	if g.CircuitOpen() {
		d, at, err := g.ReserveSlot(ctx, req, slot, token)
		return d, 0, at, err
	}
	op := ratelimit.Op{Kind: ratelimit.OpSlotTurn, Request: req, Slot: slot, Token: token, Ticket: ticket, Wait: wait}
	res, err := g.next.Do(ctx, op)
	return res.Decision, res.Ticket, res.At, err
}

// waiting is OpWaiting around the breaker: declined while a breaker is
// open.
func (g *Breaker) waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	if g.CircuitOpen() {
		return 0, 0, errOpenQueue
	}
	res, err := g.next.Do(ctx, ratelimit.Op{Kind: ratelimit.OpWaiting, Request: req})
	return int(res.Count), res.Left, err
}

// cooling is OpCooling around the breaker: while a breaker is open it
// fails at once with an error wrapping [ratelimit.ErrCircuitOpen] (the
// rule tells its hook), so that a call of a rule with a cooldown line
// does not wait for an unreachable backend before its policy decides it.
func (g *Breaker) cooling(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	if g.CircuitOpen() {
		return -1, 0, &ratelimit.BackendError{Name: req.Name, Err: ratelimit.ErrCircuitOpen}
	}
	res, err := g.next.Do(ctx, ratelimit.Op{Kind: ratelimit.OpCooling, Request: req})
	return res.Line, res.Left, err
}
