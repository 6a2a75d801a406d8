package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// holdsSlots returns an error unless limiter holds concurrency slots
// (OpTakeSlot).
func holdsSlots(name string, limiter Limiter) error {
	if !can(limiter, OpTakeSlot) {
		return fmt.Errorf("%w: %s: limiter %T cannot hold concurrency slots", ErrInvalidLimit, name, limiter)
	}
	return nil
}

// isConcurrency reports whether l is a concurrency limit.
func isConcurrency(l Limit) bool { return l.Algorithm == limitfacts.Concurrency }

// lease returns the lease of a concurrency limit.
func (l Limit) lease() time.Duration { return limitfacts.Lease(l.Period) }

// splitSlot returns the rate limits of limits and its concurrency limit,
// if any (ok), or an error for more than one.
func splitSlot(name string, limits []Limit) (rates []Limit, slot Limit, ok bool, err error) {
	for _, l := range limits {
		if !isConcurrency(l) {
			continue
		}
		if ok {
			return nil, Limit{}, false, fmt.Errorf("%w: %s: more than one concurrency limit", ErrInvalidLimit, name)
		}
		if err := limitfacts.CheckConcurrency(l.Threshold, l.Period); err != nil {
			return nil, Limit{}, false, fmt.Errorf("%w: %s: %w", ErrInvalidLimit, name, err)
		}
		if l.Cooldown {
			return nil, Limit{}, false, fmt.Errorf("%w: %s: cooldown of a concurrency limit: cool one of the rule's rate limits", ErrInvalidLimit, name)
		}
		slot, ok = l, true
	}
	if !ok {
		return limits, Limit{}, false, nil
	}
	for _, l := range limits {
		if !isConcurrency(l) {
			rates = append(rates, l)
		}
	}
	return rates, slot, true, nil
}

// tokenPrefix makes the tokens of this process unique among processes.
var tokenPrefix = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ":"
}()

var tokenSeq atomic.Uint64

// newToken returns a token no other call of any process holds.
func newToken() string { return tokenPrefix + strconv.FormatUint(tokenSeq.Add(1), 36) }

// heldSlot is the slot a reservation holds, until released.
type heldSlot struct {
	hook     InFlightHook // told of the slot taken and given back, or nil
	limiter  Limiter
	req      Request
	limit    Limit
	token    string
	released atomic.Bool
	mu       sync.Mutex
	renew    *time.Timer
}

// reserveSlot is Reserve for a rule with a concurrency limit.
func (r *Rule) reserveSlot(ctx context.Context, limiter Limiter, req Request, slot Limit, res *Reservation) error {
	if err := holdsSlots(r.Name, limiter); err != nil {
		return err
	}
	req.Rule = nil // its limits are the rate limits alone
	all := req
	all.Limits = append(req.Limits[:len(req.Limits):len(req.Limits)], slot)
	var start time.Time
	var queues bool  // its waiting calls queue
	var ticket int64 // the call's place in its queue
	if r.Wait > 0 {
		start = time.Now()
		queues = can(limiter, OpSlotTurn)
	}
	defer func() { r.dequeue(ctx, limiter, &req, ticket) }()
	for {
		token := newToken()
		d, cooling := r.cooling(ctx, limiter, &req)
		var at time.Time
		var err error
		if !cooling {
			if queues {
				d, ticket, at, err = slotTurn(ctx, limiter, req, slot, token, ticket, time.Until(r.deadline(ctx, start)))
				if errors.Is(err, errors.ErrUnsupported) {
					queues = false
				}
			}
			if !queues {
				d, at, err = takeSlot(ctx, limiter, req, slot, token)
			}
			if err == nil && d.Source != SourceQueue {
				r.reportSlot(ctx, limiter, &all, d)
			}
		}
		d, err = shedIfBusy(ctx, d, err)
		if err != nil {
			if err = r.failure(ctx, limiter, err); err != nil {
				return err
			}
			return nil // fails open: no slot taken, nothing to settle
		}
		if d.Allowed {
			r.holdSlot(ctx, limiter, req, slot, token, at, res)
			return r.pace(ctx, d.Delay)
		}
		pause, ok := r.slotPause(ctx, start, d, len(req.Limits))
		switch {
		case queues && ticket == 0 && !cooling:
			ok = false // no place: denied beyond its wait, or the queue is full
		case queues && d.Source == SourceQueue:
			pause = max(d.RetryAfter, minRetrySleep) // behind others: as told
		}
		if !ok {
			return r.limitError(&all, d)
		}
		if err := sleepCtx(ctx, pause); err != nil {
			return fmt.Errorf("ratelimit: %s: %w while waiting for a slot", r.Name, err)
		}
	}
}

// holdSlot makes res hold the slot that the call of req took with token
// (its rate limits charged at at), tells the hook it is in flight, and
// schedules the slot's renewals.
func (r *Rule) holdSlot(ctx context.Context, limiter Limiter, req Request, slot Limit, token string, at time.Time, res *Reservation) {
	if len(req.Limits) > 0 && can(limiter, OpAdjust) {
		res.limiter = limiter
	}
	res.at = at
	h := &heldSlot{limiter: limiter, req: req, limit: slot, token: token}
	if c := configOf(limiter); c != nil {
		if h.hook, _ = c.Hook.(InFlightHook); h.hook != nil {
			h.hook.InFlight(ctx, r.Name, 1)
		}
	}
	h.schedule()
	res.slot = h
}

// slotPause returns how long a call of r with a concurrency limit,
// which began waiting at start and was denied d, sleeps before it asks
// again, or false when it must not wait: r has no Wait, its wait is over,
// or a rate limit denied it until after then. A call a rate limit denied
// sleeps until its retry (plus up to 10% of jitter): no slot given back
// can admit it sooner. A call denied for want of
// a slot (LimitIndex slotIndex) polls until its wait is over, whatever
// its RetryAfter (the end of the soonest lease, a bound: a call that gives
// its slot back frees it at once): every 5 to 15 ms (spread, so that
// waiting callers do not ask in step), or at the retry if sooner.
func (r *Rule) slotPause(ctx context.Context, start time.Time, d Decision, slotIndex int) (time.Duration, bool) {
	if r.Wait <= 0 {
		return 0, false
	}
	left := time.Until(r.deadline(ctx, start))
	if left <= 0 || d.LimitIndex != slotIndex && d.RetryAfter > left {
		return 0, false
	}
	if d.LimitIndex != slotIndex { // a rate limit denied it: nothing frees before its retry
		return min(max(retryJitter(d.RetryAfter), time.Millisecond), left), true
	}
	pause := min(d.RetryAfter, time.Duration(5+mrand.IntN(10))*time.Millisecond)
	return min(max(pause, time.Millisecond), left), true
}

// reportSlot tells limiter's hook of the decision d of a call with a
// slot, whose request all has the slot's limit last.
func (r *Rule) reportSlot(ctx context.Context, limiter Limiter, all *Request, d Decision) {
	c := configOf(limiter)
	if c == nil || c.Hook == nil {
		return
	}
	seen := Request{Name: all.Name, Key: callkey.Bound(all.Key), Cost: all.Cost, Limits: all.Limits, Rule: all.Rule}
	c.Hook.Decided(ctx, &seen, d)
}

// schedule arms the renewal of the slot's lease, every third of a lease.
func (h *heldSlot) schedule() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released.Load() {
		return
	}
	h.renew = time.AfterFunc(h.limit.lease()/3, func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.limit.lease()/3)
		defer cancel()
		if held, err := renewSlot(ctx, h.limiter, h.req, h.limit, h.token); err == nil && !held {
			return // lost (the process stalled past its lease): nothing to renew
		}
		h.schedule()
	})
}

// release gives the slot back, once.
func (h *heldSlot) release(ctx context.Context) error {
	if h == nil || !h.released.CompareAndSwap(false, true) {
		return nil
	}
	h.mu.Lock()
	if h.renew != nil {
		h.renew.Stop()
	}
	h.mu.Unlock()
	if h.hook != nil {
		h.hook.InFlight(ctx, h.req.Name, -1)
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	return giveSlot(ctx, h.limiter, h.req, h.limit, h.token)
}

// Release gives back the concurrency slot the reservation holds, if any,
// and stops renewing its lease; later calls do nothing. It charges and
// refunds nothing: [Reservation.Settle] does that, and releases the slot
// too. Call it in a defer, so that a panic gives the slot back. It asks
// the backend once, even when ctx is done: on a context detached from
// ctx's cancellation, bounded by [GiveBackTimeout].
func (res *Reservation) Release(ctx context.Context) error {
	return res.slot.release(ctx)
}

// reserveWithSlot is Reserve for a rule with a concurrency limit: its rate
// limits (or their overrides) and the slot are taken together.
func (r *Rule) reserveWithSlot(ctx context.Context, limiter Limiter, key string, units int64, slot Limit) (*Reservation, error) {
	rates, _, _, err := splitSlot(r.Name, r.oneKeyLimits(ctx, limiter, key))
	if err != nil {
		return nil, err
	}
	switch verdictOf(rates) {
	case Unlimited:
		rates = nil // the override exempts the call from its rate limits
	case Block:
		req := Request{Name: r.Name, Key: key, Cost: units, Limits: rates}
		return nil, r.verdict(ctx, limiter, &req, Block, -1)
	}
	req := Request{Name: r.Name, Key: key, Cost: units, Limits: rates}
	if len(rates) > 0 {
		if err := req.Validate(); err != nil {
			return nil, err
		}
	}
	res := &Reservation{rule: r, req: req}
	if err := r.reserveSlot(ctx, limiter, req, slot, res); err != nil {
		return nil, err
	}
	return res, nil
}

// hasSlot reports whether limits hold a concurrency limit.
func hasSlot(limits []Limit) bool {
	for _, l := range limits {
		if isConcurrency(l) {
			return true
		}
	}
	return false
}

// peekSlot is [Peek] of req, whose limits hold a concurrency limit: one
// decision of the slot and the rate limits together, as [Rule.Reserve]
// takes them, charging and taking nothing. It answers as Reserve would,
// except that an admitted call's LimitIndex is the slot's when it is the
// tightest limit after the call (slots left below the rate limits'
// Remaining, or no rate limits): then Remaining is the slots free now and
// ResetAfter the lease. A call denied for want of a slot has RetryAfter
// the soonest end of a lease, ResetAfter the last.
func peekSlot(ctx context.Context, limiter Limiter, req Request) (Decision, error) {
	rates, slot, _, err := splitSlot(req.Name, req.Limits)
	if err != nil {
		return Decision{}, err
	}
	if !can(limiter, OpPeekSlot) {
		return Decision{}, fmt.Errorf("ratelimit: %s: %T cannot peek at concurrency slots: %w", req.Name, limiter, errors.ErrUnsupported)
	}
	if req.Keys != nil {
		// Reserve keys a rule's slot and rate limits with one key.
		for _, k := range req.Keys {
			if k != req.Keys[0] {
				return Decision{}, fmt.Errorf("%w: %s: a concurrency limit needs one key for every limit", ErrInvalidLimit, req.Name)
			}
		}
		req.Key, req.Keys = req.Keys[0], nil
	}
	at := make([]int, 0, len(rates)) // where each rate limit is in req.Limits
	slotAt := 0
	for i, l := range req.Limits {
		if isConcurrency(l) {
			slotAt = i
		} else {
			at = append(at, i)
		}
	}
	req.Limits, req.Rule = rates, nil
	d, held, err := peekSlotOf(ctx, limiter, req, slot)
	if err != nil {
		return Decision{}, err
	}
	free := slot.Threshold - held
	switch {
	case !d.Allowed && d.LimitIndex == len(rates):
		d.LimitIndex = slotAt
	case !d.Allowed:
		d.LimitIndex = at[d.LimitIndex]
	case len(rates) == 0 || free-1 < d.Remaining:
		d.Remaining, d.ResetAfter, d.LimitIndex = free, slot.lease(), slotAt
	default:
		d.Remaining += req.UnitsOf(d.LimitIndex)
		d.LimitIndex = at[d.LimitIndex]
	}
	return d, nil
}
