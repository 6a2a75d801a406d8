package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// minRetrySleep is the least a waiting call sleeps after its own attempt
// was denied, even if the denial said it could retry at once, so that no
// limiter is ever polled in a tight loop.
const minRetrySleep = time.Millisecond

// joinWaiting starts check of a call of req by a rule with Wait, on a
// limiter that does not queue waiting calls ([OpTurn]): when calls of the
// same queue already wait in this process, the call joins them (joined)
// and waits its turn, within r.Wait from start, telling in o what it
// learnt of the call.
func (r *Rule) joinWaiting(ctx context.Context, limiter Limiter, req *Request, start time.Time, o *outcome) (joined bool, err error) {
	if waitQueueCount.Load() == 0 { // nobody waits
		return false, nil
	}
	k := queueKeyOf(limiter, req)
	q := joinQueue(k, nil)
	if q == nil {
		return false, nil
	}
	return true, r.waitFor(ctx, limiter, req, k, q, start, o)
}

// waitDenied has a call of req, denied as o.d tells, wait to be admitted
// within r.Wait from start: it joins the queue of its calls waiting in
// this process, or opens it, and tells in o what it learnt of the call.
func (r *Rule) waitDenied(ctx context.Context, limiter Limiter, req *Request, start time.Time, o *outcome) error {
	k := queueKeyOf(limiter, req)
	return r.waitFor(ctx, limiter, req, k, joinQueue(k, &o.d), start, o)
}

// waitFor is wait, telling in o what it learnt of the call.
func (r *Rule) waitFor(ctx context.Context, limiter Limiter, req *Request, k queueKey, q *waitQueue, start time.Time, o *outcome) error {
	w, err := r.wait(ctx, limiter, req, k, q, start)
	w.perLimit = req.Keys != nil
	*o = w
	return err
}

// wait makes a denied call, a member of queue, wait to be admitted.
func (r *Rule) wait(ctx context.Context, limiter Limiter, req *Request, k queueKey, q *waitQueue, start time.Time) (outcome, error) {
	o, err := r.waitInQueue(ctx, limiter, req, q, r.deadline(ctx, start))
	q.leave(k)
	if err == nil && o.decided && o.d.Allowed {
		err = r.pace(ctx, o.d.Delay)
	}
	return o, err
}

// waitInQueue waits for the head of the queue and, there, for admission.
func (r *Rule) waitInQueue(ctx context.Context, limiter Limiter, req *Request, q *waitQueue, deadline time.Time) (outcome, error) {
	if d := q.latest(); !d.Allowed && d.RetryAfter > time.Until(deadline) {
		// Nothing will be admitted within the budget: the calls ahead
		// were just told so.
		return outcome{d: d, limits: req.Limits, decided: true}, r.limitError(req, d)
	}
	select {
	case q.turn <- struct{}{}:
	default:
		timer := time.NewTimer(time.Until(deadline))
		select {
		case q.turn <- struct{}{}:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return r.stopped(ctx, req, q.latest())
		case <-timer.C:
			// The budget ran out in the queue: one last try of its own.
			return r.attempt(ctx, limiter, req, q)
		}
	}
	defer func() { <-q.turn }()
	tried := false
	for {
		if d := q.latest(); !d.Allowed {
			pause := d.RetryAfter
			if tried {
				pause = max(pause, minRetrySleep)
			}
			if pause > 0 {
				left := time.Until(deadline)
				if pause > left {
					return outcome{d: d, limits: req.Limits, decided: true}, r.limitError(req, d)
				}
				if err := sleepCtx(ctx, min(retryJitter(pause), left)); err != nil {
					return r.stopped(ctx, req, q.latest())
				}
			}
		}
		o, err := r.attempt(ctx, limiter, req, q)
		if err == nil || !o.decided || ctx.Err() != nil || o.d.RetryAfter > time.Until(deadline) {
			return o, err
		}
		tried = true
	}
}

// attempt asks the limiter once for a waiting call and notes the decision
// in its queue. A denial is returned as a *LimitError.
func (r *Rule) attempt(ctx context.Context, limiter Limiter, req *Request, q *waitQueue) (outcome, error) {
	if ctx.Err() != nil {
		return r.stopped(ctx, req, q.latest())
	}
	d, limits, err := r.allow(ctx, limiter, req)
	if err != nil {
		if ctx.Err() != nil {
			return r.stopped(ctx, req, q.latest())
		}
		return outcome{limits: req.Limits}, r.failure(ctx, limiter, err)
	}
	q.note(d, time.Now())
	o := outcome{d: d, limits: limits, decided: true}
	if d.Allowed {
		return o, nil
	}
	decided := *req
	decided.Limits = limits // the fallback's, when it decided
	return o, r.limitError(&decided, d)
}

// allow asks limiter to decide req, and its fallback when limiter could not
// (check does the same in place, sparing a copy of req and the decision).
// It returns the limits the decision describes: req.Limits, or those the
// fallback enforced.
func (r *Rule) allow(ctx context.Context, limiter Limiter, req *Request) (Decision, []Limit, error) {
	if d, ok := r.cooling(ctx, limiter, req); ok {
		return d, req.Limits, nil
	}
	d, err := limiter.Allow(ctx, *req)
	if err != nil {
		return r.fallback(ctx, limiter, *req, err)
	}
	return d, req.Limits, nil
}

// stopped returns the error of a call whose ctx ended while it waited:
// it wraps both ctx.Err() and the LimitError of the latest denial d.
func (r *Rule) stopped(ctx context.Context, req *Request, d Decision) (outcome, error) {
	d.Allowed = false
	return outcome{d: d, limits: req.Limits, decided: true},
		fmt.Errorf("%w while waiting: %w", ctx.Err(), r.limitError(req, d))
}

// checkInTurn is check of a call of a rule with Wait on a limiter that
// queues waiting calls: the call is decided in its turn (see
// [OpTurn]), sleeping between tries for the RetryAfter it is told, until
// it is admitted, its wait is over or ctx ends; the place it holds is
// freed when it stops waiting. done is false when the call is left to
// conclude (the fallback, and r's OnError) as err and o.d tell: the
// limiter failed to decide it, or cannot queue it and decided it (or
// failed to) without a turn.
func (r *Rule) checkInTurn(ctx context.Context, limiter Limiter, req *Request, start time.Time, o *outcome) (done bool, err error) {
	deadline := r.deadline(ctx, start)
	// The first try's wait is counted from start, without reading the
	// clock again: if anything took time since (a cooldown's read), the
	// call may get a place it gives back at once, as the denial's retry is
	// checked against the clock below.
	left := deadline.Sub(start)
	var ticket int64
	for {
		d, held, _, err := turn(ctx, limiter, *req, ticket, left)
		if err != nil && ticket == 0 && errors.Is(err, errors.ErrUnsupported) {
			// The limiter cannot queue this call: it waits in its
			// process's order.
			o.d, err = limiter.Allow(ctx, *req)
			return false, err
		}
		if err != nil {
			r.dequeue(ctx, limiter, req, ticket)
			if ctx.Err() != nil && ticket != 0 {
				_, err := r.stopped(ctx, req, o.d)
				return true, err
			}
			return false, err
		}
		o.d, o.limits, o.decided = d, req.Limits, true
		if d.Allowed {
			return true, r.pace(ctx, d.Delay)
		}
		if ticket = held; ticket == 0 || d.RetryAfter > time.Until(deadline) {
			r.dequeue(ctx, limiter, req, ticket)
			return true, r.denied(limiter, r.limitError(req, d), d.LimitIndex)
		}
		if err := sleepCtx(ctx, max(d.RetryAfter, minRetrySleep)); err != nil {
			r.dequeue(ctx, limiter, req, ticket)
			_, err := r.stopped(ctx, req, d)
			return true, err
		}
		left = time.Until(deadline)
	}
}

// dequeue frees the place ticket holds in req's queue, if any, on a
// context detached from ctx's cancellation: a place the backend did not
// free is dropped QueueGrace after it was due.
func (r *Rule) dequeue(ctx context.Context, limiter Limiter, req *Request, ticket int64) {
	if ticket == 0 {
		return
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	_, _ = limiter.Do(ctx, Op{Kind: OpDequeue, Request: *req, Ticket: ticket}) // the backend tells its hook of a failure
}

// deadline returns when a call that started waiting at start must stop:
// after r.Wait, or at ctx's deadline if that is sooner.
func (r *Rule) deadline(ctx context.Context, start time.Time) time.Time {
	end := start.Add(r.Wait)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end
}

// retryJitter returns d plus up to 10% of it, so that callers told the same
// RetryAfter do not all come back at once.
func retryJitter(d time.Duration) time.Duration {
	return d + rand.N(d/10+1)
}

// queueKey identifies the calls that queue together: those of one limit
// identity and key on one limiter.
type queueKey struct {
	limiter   any // the limiter if it is a pointer (comparable), else nil
	name, key string
	perLimit  bool // key is callkey.Join of a key per limit
}

// queueKeyOf returns the queueKey of the calls of req on limiter.
func queueKeyOf(limiter Limiter, req *Request) queueKey {
	k := queueKey{name: req.Name, key: req.Key}
	if req.Keys != nil {
		k.key, k.perLimit = callkey.Join(req.Keys), true
	}
	if t := reflect.TypeOf(limiter); t != nil && t.Kind() == reflect.Pointer {
		k.limiter = limiter
	}
	return k
}

// waitQueue is the queue of the calls of one queueKey waiting in this
// process. Only the call at its head asks the limiter; the others wait for
// their turn, so N waiting calls cost one decision per attempt, not N.
type waitQueue struct {
	// turn holds a token while a call is at the head. Senders blocked on
	// a channel are served in order, so the queue is first come, first
	// served.
	turn chan struct{}

	mu      sync.Mutex
	members int
	closed  bool      // removed from waitQueues; join another
	last    Decision  // the latest decision made for a member
	lastAt  time.Time // when it was made
}

// waitQueues holds the queues that have members: queueKey → *waitQueue.
// waitQueueCount counts them, so calls skip the lookup while nobody waits.
var (
	waitQueues     sync.Map
	waitQueueCount atomic.Int64
)

// joinQueue joins the queue of k. With first (the denial of the caller's own
// attempt) it creates the queue if there is none; without, it returns nil
// when there is none.
func joinQueue(k queueKey, first *Decision) *waitQueue {
	if first == nil && waitQueueCount.Load() == 0 {
		return nil
	}
	for {
		v, ok := waitQueues.Load(k)
		if !ok {
			if first == nil {
				return nil
			}
			var loaded bool
			if v, loaded = waitQueues.LoadOrStore(k, &waitQueue{turn: make(chan struct{}, 1)}); !loaded {
				waitQueueCount.Add(1)
			}
		}
		q := v.(*waitQueue)
		q.mu.Lock()
		if !q.closed {
			q.members++
			if first != nil {
				q.noteLocked(*first, time.Now())
			}
			q.mu.Unlock()
			return q
		}
		q.mu.Unlock()
		if waitQueues.CompareAndDelete(k, q) {
			waitQueueCount.Add(-1)
		}
	}
}

// leave removes a member, and the queue from waitQueues with its last one.
func (q *waitQueue) leave(k queueKey) {
	q.mu.Lock()
	q.members--
	if q.members == 0 {
		q.closed = true
		if waitQueues.CompareAndDelete(k, q) {
			waitQueueCount.Add(-1)
		}
	}
	q.mu.Unlock()
}

// note records a decision made for a member.
func (q *waitQueue) note(d Decision, at time.Time) {
	q.mu.Lock()
	q.noteLocked(d, at)
	q.mu.Unlock()
}

// noteLocked is note, with q.mu held.
func (q *waitQueue) noteLocked(d Decision, at time.Time) {
	if at.After(q.lastAt) {
		q.last, q.lastAt = d, at
	}
}

// latest returns the latest decision made for a member, with RetryAfter
// and ResetAfter counted from now.
func (q *waitQueue) latest() Decision {
	q.mu.Lock()
	d, at := q.last, q.lastAt
	q.mu.Unlock()
	elapsed := time.Since(at)
	d.RetryAfter = max(d.RetryAfter-elapsed, 0)
	d.ResetAfter = max(d.ResetAfter-elapsed, 0)
	return d
}

// peekQueue tells a Peek of a call of r (req, with r's effective limits)
// whether calls wait on its key ahead of it, and if so what it would be
// told behind them: by the limiter's queue (see [OpWaiting]), or,
// when the limiter queues none or declines the call, by the queue of the
// calls waiting in this process, which were last told a denial.
func (r *Rule) peekQueue(ctx context.Context, limiter Limiter, req Request) (Decision, bool, error) {
	if can(limiter, OpWaiting) {
		rates, slotIndex := req, -1 // a slot's queue is that of the rate limits (see reserveSlot)
		for i, l := range req.Limits {
			if isConcurrency(l) {
				slotIndex = i
				rates.Limits = append(req.Limits[:i:i], req.Limits[i+1:]...)
			}
		}
		if slotIndex >= 0 && req.Keys != nil { // one key for the slot and the rate limits, as Reserve keys them
			rates.Key, rates.Keys = req.Keys[0], nil
		}
		n, due, err := waiting(ctx, limiter, rates)
		switch {
		case errors.Is(err, errors.ErrUnsupported): // its calls wait in process order
		case err != nil:
			return Decision{}, false, err
		case n == 0:
			return Decision{}, false, nil
		case slotIndex < 0:
			d, err := rates.Behind(ctx, limiter, n, due, nil, r.Wait)
			return d, err == nil, err
		default:
			return r.peekSlotQueue(ctx, limiter, req, rates, slotIndex, n, due)
		}
	}
	if waitQueueCount.Load() == 0 {
		return Decision{}, false, nil
	}
	v, ok := waitQueues.Load(queueKeyOf(limiter, &req))
	if !ok {
		return Decision{}, false, nil
	}
	q := v.(*waitQueue)
	q.mu.Lock()
	members := q.members
	q.mu.Unlock()
	if d := q.latest(); members > 0 && !d.Allowed {
		return d, true, nil
	}
	return Decision{}, false, nil
}

// peekSlotQueue is peekQueue of a call of req, whose limit slotIndex is a
// concurrency limit (rates: req without it), behind n others, the last
// due back after due: it has its turn, as ReserveSlotInTurn would give it,
// when its rate limits would admit it behind them and more than n slots
// are free.
func (r *Rule) peekSlotQueue(ctx context.Context, limiter Limiter, req, rates Request, slotIndex, n int, due time.Duration) (Decision, bool, error) {
	slot := req.Limits[slotIndex]
	d, err := rates.Behind(ctx, limiter, n, due, &slot, r.Wait)
	if err != nil {
		return Decision{}, false, err
	}
	if d.LimitIndex == len(rates.Limits) { // the slot's: are enough free?
		if can(limiter, OpPeekSlot) {
			_, held, err := peekSlotOf(ctx, limiter, rates, slot)
			if err != nil {
				return Decision{}, false, err
			}
			if slot.Threshold-held > int64(n) {
				return Decision{}, false, nil
			}
		}
		d.LimitIndex = slotIndex
	} else if d.LimitIndex >= slotIndex { // a rate limit after the slot
		d.LimitIndex++
	}
	return d, true, nil
}
