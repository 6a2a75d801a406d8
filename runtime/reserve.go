package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// Reservation is units that [Rule.Reserve] took ahead of a call whose
// final cost is known only after it, such as the tokens of an LLM
// completion; [Reservation.Settle] makes the final charge. A reservation
// never settled (its process died) stays charged as reserved.
//
// What a settle changes, per algorithm (both backends decide alike):
//
//   - SlidingLog: a refund removes units logged at the reservation's time
//     (none once they left the window); a charge on top is logged at the
//     settle's time, as if a call of the extra units were admitted then,
//     so the debt leaves the window a full period after the settle (never
//     earlier than the units that caused it were known).
//   - FixedWindow, SlidingWindow: a refund is taken off the window the
//     reservation was charged in while it runs; a window that has ended
//     gives nothing back. A charge on top counts in the window running at
//     the settle. So for a calendar period: a reservation of March 31st
//     settled on April 1st refunds nothing, and its debt counts in April.
//   - TokenBucket, GCRA, LeakyBucket: a refund moves the bucket's TAT
//     back, never beyond a full bucket (an empty queue); a charge on top
//     moves it on.
//
// A charge on top is never denied: it may take a limit past its threshold
// (debt), and later calls are denied, with a RetryAfter that counts the
// debt, until it is paid. A settle charges on top at most what takes a
// limit's state to twice its [Limit.MaxCost] (one MaxCost of debt; a
// SlidingWindow's count to [MaxSlidingWindowThreshold]).
//
// # Concurrency limits
//
// A [Limit] whose Algorithm is "concurrency" is a concurrency limit: at
// most Threshold calls of a name and key in flight at once, across every
// process sharing the limiter's backend. Its Period is the lease of a
// slot (0 means 30 s). A rule has at most one; its calls go through
// [Rule.Reserve], which takes a slot in the same all-or-nothing decision
// as the rule's rate limits (Check fails them as invalid), and hold it
// until [Reservation.Release] or [Reservation.Settle] gives it back: call
// Release in a defer, so a panic gives it back too. While a call holds
// its slot, its process renews the lease every third of a lease; the
// slots of a process that died free within a lease, and a reservation
// never released holds its slot until its process exits. A give-back
// that fails (the backend out of reach) is Release's or Settle's error
// and is told to the limiter's hook (Failed) once; the slot then frees
// when its lease ends, as nothing renews it. [Peek] tells how full the
// slots are, and [Reset] frees them. A call denied
// for want of a slot gets a [*LimitError] whose Limit is the concurrency
// limit and whose RetryAfter is when the soonest lease ends (a bound: a
// slot frees as soon as a call gives it back); with the rule's Wait the
// call polls for a slot until its wait is over, whatever the lease, so
// a slot given back admits it, in the order calls began to wait on a
// limiter that offers [OpTurn]. Overrides apply to the rate limits
// only, shadow mode to neither; when the backend fails, [FailOpen] lets
// the call run without a slot, and the other policies fail it. A limiter
// holds slots when it carries out [OpTakeSlot]; an
// [InFlightHook] is told of each slot taken (1) and given back (-1), as
// limitmetrics.Metrics counts them.
type Reservation struct {
	rule    *Rule
	limiter Limiter   // nil: nothing was charged, so Settle charges nothing
	req     Request   // what was charged: name, key (as given), units, limits
	at      time.Time // when the backend charged it
	settled atomic.Bool
	slot    *heldSlot // the concurrency slot held, or nil
	// uncharged is set for a call of a rule that counts only failures,
	// admitted by a Peek: Settle charges on top, Refund gives nothing.
	uncharged bool
}

// Reserve takes units (0 means 1) under r's limits on limiter for a call
// with the given keys, and returns the reservation that [Reservation.Settle]
// settles once the call's cost is known. It is denied exactly as
// [Rule.Check] would deny a call of that cost (a [*LimitError]), with the
// same overrides, shadow mode and error policy: a call that no backend
// charged (an override exempts it, FailOpen lets it through on a failure,
// a shadow rule's would-be denial) gets a reservation whose Settle charges
// nothing; a call the fallback decided ([FailLocal]) stays charged there
// as reserved. A denied call waits up to r.Wait, retrying when the denial
// says, in the order calls began to wait when the limiter offers
// [OpTurn], as Check does. A rule with a concurrency
// limit also takes a slot, which the call holds until it gives it back
// (see Concurrency limits at [Reservation]).
//
// A rule with OnlyFailures charges nothing here: a call is admitted while
// a [Peek] of its cost admits it (waiting up to r.Wait, as a denied call
// does, and told to the limiter's hook as a decision), and Settle charges
// it when it failed, on top, as a debt is (see [Reservation]); failures
// may so take a limit past its threshold by the calls in flight when it
// filled. On a limiter that cannot peek, on a backend failure (met as
// above), and with a concurrency limit, the call is charged as it runs.
//
// A reservation is made, settled and given back under the keys it was
// made with, as Check takes them: no key ("") or one, or a key per limit
// (the only way with shared lines); a call with a concurrency limit is
// reserved under one key. Settle and Refund change every limit's key in
// one Adjust, all or nothing as a decision is. Reserve fails with an
// error wrapping [ErrInvalidLimit] otherwise, as it does when the limiter
// does not carry out [OpReserve] and [OpAdjust].
func (r *Rule) Reserve(ctx context.Context, limiter Limiter, units int64, keys ...string) (*Reservation, error) {
	key, lines, err := r.reserveKeys(limiter, units, keys)
	if err != nil {
		return nil, err
	}
	if _, slot, ok, err := splitSlot(r.Name, r.Limits); err != nil || ok {
		if err == nil && lines != nil {
			err = fmt.Errorf("%w: %s: a call with a concurrency limit is reserved under one key, not a key per limit", ErrInvalidLimit, r.Name)
		}
		if err != nil {
			return nil, err
		}
		return r.reserveWithSlot(ctx, limiter, key, units, slot)
	}
	if !can(limiter, OpReserve) || !can(limiter, OpAdjust) {
		return nil, fmt.Errorf("%w: %s: limiter %T cannot settle reservations", ErrInvalidLimit, r.Name, limiter)
	}
	req, line := r.request(ctx, limiter, key, lines, units)
	res := &Reservation{rule: r, req: req}
	if r.Shadow {
		ctx = withShadow(ctx) // its hook tells would-be denials apart
	}
	if len(req.Limits) == 1 && len(r.Limits) > 0 && &req.Limits[0] != &r.Limits[0] {
		if v := verdictOf(req.Limits); v != "" {
			return res, r.verdict(ctx, limiter, &req, v, line)
		}
	}
	if r.OnlyFailures {
		if res, decided, err := r.reserveUncharged(ctx, limiter, req, res); decided {
			return res, err
		}
	}
	return r.reserveCharged(ctx, limiter, req, res)
}

// reserveCharged is Reserve of req once nothing but the limiter can
// decide it: it charges res's call, waiting up to r.Wait for its turn,
// and falls back or fails as r's error policy says.
func (r *Rule) reserveCharged(ctx context.Context, limiter Limiter, req Request, res *Reservation) (*Reservation, error) {
	var start time.Time
	var queues bool  // its waiting calls queue
	var ticket int64 // the call's place in its queue
	if r.Wait > 0 && !r.Shadow {
		start = time.Now()
		queues = can(limiter, OpTurn)
	}
	defer func() { r.dequeue(ctx, limiter, &req, ticket) }()
	for {
		d, cooling := r.cooling(ctx, limiter, &req)
		var at time.Time
		var err error
		switch {
		case cooling:
		case queues:
			d, ticket, at, err = turn(ctx, limiter, req, ticket, time.Until(r.deadline(ctx, start)))
			if errors.Is(err, errors.ErrUnsupported) {
				queues = false
				d, at, err = reserve(ctx, limiter, req)
			}
		default:
			d, at, err = reserve(ctx, limiter, req)
		}
		if err != nil {
			if d, limits, ferr := r.fallback(ctx, limiter, req, err); ferr == nil {
				if d.Allowed || r.Shadow {
					return res, r.pace(ctx, d.Delay)
				}
				decided := req
				decided.Limits = limits
				return nil, r.limitError(&decided, d)
			}
			if err = r.failure(ctx, limiter, err); err != nil {
				return nil, err
			}
			return res, nil
		}
		switch {
		case d.Allowed:
			res.limiter, res.at = limiter, at
			return res, r.pace(ctx, d.Delay)
		case r.Shadow:
			return res, nil
		case r.Wait <= 0 || d.RetryAfter > time.Until(r.deadline(ctx, start)) || queues && ticket == 0 && !cooling:
			return nil, r.limitError(&req, d)
		}
		if err := sleepCtx(ctx, max(d.RetryAfter, minRetrySleep)); err != nil {
			return nil, fmt.Errorf("ratelimit: %s: %w while waiting %s to reserve", r.Name, err, d.RetryAfter)
		}
	}
}

// reserveKeys returns the key of a reservation of units under keys: one
// key, or a key per limit (lines), or why there is none: a negative cost,
// or lines that the rule's shared lines or the limiter do not allow.
func (r *Rule) reserveKeys(limiter Limiter, units int64, keys []string) (string, []string, error) {
	key, lines, err := r.split(keys)
	if err == nil && units < 0 {
		ce := &CostError{Name: r.Name, Cost: units}
		if len(r.Limits) > 0 {
			ce.Limit = r.Limits[0]
		}
		err = ce
	}
	if err == nil {
		err = r.canShare(limiter, lines)
	}
	return key, lines, err
}

// reserveUncharged admits a call of a rule that counts only failures while
// a Peek of it admits it, charging nothing (see Rule.Reserve), and
// reports whether it decided: a Peek that failed leaves the call to be
// charged as it runs.
func (r *Rule) reserveUncharged(ctx context.Context, limiter Limiter, req Request, res *Reservation) (*Reservation, bool, error) {
	start := time.Now()
	for {
		d, cooling := r.cooling(ctx, limiter, &req)
		if !cooling {
			var err error
			if d, err = Peek(ctx, limiter, req); err != nil {
				return nil, false, nil
			}
			r.tell(ctx, limiter, &req, d)
		}
		switch {
		case d.Allowed || r.Shadow:
			res.limiter, res.at, res.uncharged = limiter, time.Now(), true
			return res, true, nil
		case r.Wait <= 0 || d.RetryAfter > time.Until(r.deadline(ctx, start)):
			return nil, true, r.limitError(&req, d)
		}
		if err := sleepCtx(ctx, max(d.RetryAfter, minRetrySleep)); err != nil {
			return nil, true, fmt.Errorf("ratelimit: %s: %w while waiting %s to reserve", r.Name, err, d.RetryAfter)
		}
	}
}

// tell tells the limiter's hook, if any, the decision d of req that a
// Peek made.
func (r *Rule) tell(ctx context.Context, limiter Limiter, req *Request, d Decision) {
	if c := configOf(limiter); c != nil && c.Hook != nil {
		seen := Request{Name: req.Name, Key: callkey.Bound(req.Key), Cost: req.Cost, Limits: req.Limits, Rule: req.Rule}
		c.Hook.Decided(ctx, &seen, d)
	}
}

// Settle makes actual the final charge of the reservation: it refunds what
// was reserved beyond it, or charges on top what it exceeds the
// reservation by (see [Reservation] for what that does per algorithm). It
// asks the backend once, unless actual is what was reserved. A second
// Settle charges nothing and returns an error wrapping [ErrInvalidLimit]
// ([Reservation.Settled] tells it apart); so does an actual that is
// negative or 2^50 or more, which settles nothing. An error of the backend
// wraps [ErrBackend] (the backend tells its hook, as it tells a failed
// Allow): the reservation then stays charged as reserved, and settled.
// Settle also gives back the reservation's concurrency slot, if any (see
// [Reservation.Release]).
//
// Settle asks the backend on a context detached from ctx's cancellation
// and deadline (its values kept), bounded by [GiveBackTimeout]: a caller
// that gave up as the answer arrived (a client that disconnected) still
// gets its refund, on every backend alike.
func (res *Reservation) Settle(ctx context.Context, actual int64) error {
	if actual < 0 || actual > maxLimitValue {
		return fmt.Errorf("%w: %s: settle of %d units, not in [0, 2^50)", ErrInvalidLimit, res.rule.Name, actual)
	}
	if !res.settled.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s: reservation settled already", errSettled, res.rule.Name)
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	delta := actual - res.req.Units()
	if res.uncharged {
		delta = actual
	}
	var err error
	if res.limiter != nil && delta != 0 {
		err = adjust(ctx, res.limiter, res.req, res.at, delta)
	}
	if calls, ok := callsOf(res.req); ok && res.uncharged && actual > 0 && err == nil {
		err = adjust(ctx, res.limiter, calls, res.at, 1) // a failure counts as a call too
	}
	if rerr := res.Release(ctx); err == nil {
		err = rerr
	}
	return err
}

// Refund gives back all the reservation took, as if its call had not
// been made: its units of the limits that take its cost, and its 1 of
// those that count calls ([Limit.PerCall]), which a Settle leaves as
// they are; and its concurrency slot. A refund takes back only what still
// counts (see [Reservation] per algorithm). It settles the reservation:
// a later Settle or Refund fails as a second Settle does. Like Settle, it
// asks the backend on a context detached from ctx's cancellation, and an
// error of the backend wraps [ErrBackend]. The limits that take the cost
// and those that count calls are given back by one Adjust each.
func (res *Reservation) Refund(ctx context.Context) error {
	if !res.settled.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s: reservation settled already", errSettled, res.rule.Name)
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	var err error
	if res.limiter != nil && !res.uncharged {
		err = adjust(ctx, res.limiter, res.req, res.at, -res.req.Units())
		if calls, ok := callsOf(res.req); ok && err == nil {
			err = adjust(ctx, res.limiter, calls, res.at, -1)
		}
	}
	if rerr := res.Release(ctx); err == nil {
		err = rerr
	}
	return err
}

// callsOf returns req as a request of cost 1 whose limits that count
// calls take it and whose others do not: what Adjust changes of it is
// what req's limits that count calls took. ok is false when req has none.
func callsOf(req Request) (Request, bool) {
	ok := false
	limits := make([]Limit, len(req.Limits))
	for i, l := range req.Limits {
		ok = ok || l.PerCall
		l.PerCall = !l.PerCall
		limits[i] = l
	}
	req.Cost, req.Limits, req.Rule = 1, limits, nil
	return req, ok
}

// detached returns ctx without its cancellation and deadline, bounded by
// GiveBackTimeout instead, and the function that releases it.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), GiveBackTimeout)
}

// errSettled is wrapped by the error of a second [Reservation.Settle].
var errSettled = fmt.Errorf("%w: settled twice", ErrInvalidLimit)

// Units returns the units reserved: what the reservation took or, for a
// rule that counts only failures, what a failure's Settle charges.
func (res *Reservation) Units() int64 { return res.req.Units() }

// Settled reports whether Settle was called.
func (res *Reservation) Settled() bool { return res.settled.Load() }
