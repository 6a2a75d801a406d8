package ratelimit

import (
	"context"
	"sync"
	"time"
)

// The memory limiter's queues of waiting calls (see [Queuer]): one per
// name and key (or keys) with calls waiting, under one lock, which is also
// held while a call in its turn is decided, so that no call is decided
// past a waiting one.
type memoryQueues struct {
	mu sync.Mutex
	m  map[string]*memoryQueue
}

// memoryQueue is the places of one queue, in the order of their tickets.
type memoryQueue struct{ places []place }

// place is a waiting call's place: its ticket, and when (µs) it was told
// to come back.
type place struct{ ticket, due int64 }

// queueID names the queue of req's calls: its name and key, or keys.
func queueID(req *Request) string {
	if req.Keys != nil {
		return req.Name + "\x00k" + keysIdentity(req.Keys)
	}
	return req.Name + "\x00" + req.Key
}

// AllowInTurn decides req when it is the call's turn, else denies it with
// the soonest it could be admitted; a call that waits holds a place. See
// [Queuer].
func (l *MemoryLimiter) AllowInTurn(ctx context.Context, req Request, ticket int64, wait time.Duration) (Decision, int64, error) {
	if err := req.Validate(); err != nil {
		return Decision{}, 0, err
	}
	id := queueID(&req)
	qs := &l.queues
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.m[id]
	if q == nil {
		q = &memoryQueue{}
	}
	now := l.now()
	q.expire(now)
	at := q.find(ticket)
	var d Decision
	if at == 0 || at < 0 && len(q.places) == 0 {
		var err error
		if d, err = l.Allow(ctx, req); err != nil {
			return Decision{}, 0, err
		}
		if d.Allowed {
			held := int64(0)
			if at == 0 {
				held = ticket
				q.places = q.places[1:]
			}
			qs.keep(id, q)
			return d, held, nil
		}
	} else {
		ahead := at
		if at < 0 {
			ahead = len(q.places)
		}
		var err error
		if d, err = l.soonest(ctx, req, ahead); err != nil {
			return Decision{}, 0, err
		}
		if d.Allowed { // the units are there: the calls ahead have yet to come
			d = Decision{RetryAfter: q.dueAfter(ahead, now), LimitIndex: d.LimitIndex}
		}
		d.Allowed, d.Remaining, d.Delay, d.Source = false, 0, 0, SourceQueue
	}
	held := q.hold(at, now, d.RetryAfter, wait)
	qs.keep(id, q)
	return d, held, nil
}

// soonest peeks at req as a call that waits behind ahead others would be
// admitted: once each of them took a unit (at least) and it took its own,
// so with the cost of all of them, up to the most its limits admit at once.
func (l *MemoryLimiter) soonest(ctx context.Context, req Request, ahead int) (Decision, error) {
	req.Cost = queuedCost(&req, ahead)
	return l.Peek(ctx, req)
}

// queuedCost returns the units of req and of ahead calls of a unit each,
// bounded by the most its limits can admit at once (see [Limit.MaxCost]):
// a peek of that cost tells the soonest a call behind them could be
// admitted, or sooner.
func queuedCost(req *Request, ahead int) int64 {
	n := req.Units() + int64(ahead)
	for _, lim := range req.Limits {
		if !lim.PerCall {
			n = min(n, lim.MaxCost())
		}
	}
	return n
}

// Dequeue frees ticket's place in req's queue. See [Queuer].
func (l *MemoryLimiter) Dequeue(_ context.Context, req Request, ticket int64) error {
	id := queueID(&req)
	qs := &l.queues
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q := qs.m[id]; q != nil {
		if at := q.find(ticket); at >= 0 {
			q.places = append(q.places[:at], q.places[at+1:]...)
		}
		qs.keep(id, q)
	}
	return nil
}

// keep keeps q as id's queue while calls wait in it, and drops it then.
func (qs *memoryQueues) keep(id string, q *memoryQueue) {
	switch {
	case len(q.places) == 0:
		delete(qs.m, id)
	case qs.m == nil:
		qs.m = map[string]*memoryQueue{id: q}
	default:
		qs.m[id] = q
	}
}

// expire drops the places at the head of q whose holders did not come
// back within QueueGrace of their due time.
func (q *memoryQueue) expire(now int64) {
	for len(q.places) > 0 && q.places[0].due+QueueGrace.Microseconds() < now {
		q.places = q.places[1:]
	}
}

// find returns ticket's index in q, or -1.
func (q *memoryQueue) find(ticket int64) int {
	if ticket == 0 {
		return -1
	}
	for i, p := range q.places {
		if p.ticket == ticket {
			return i
		}
	}
	return -1
}

// dueAfter returns how long after now the last of the first n places is
// due, plus a millisecond: when a call behind them should come back.
func (q *memoryQueue) dueAfter(n int, now int64) time.Duration {
	last := now
	for _, p := range q.places[:n] {
		last = max(last, p.due)
	}
	return time.Duration(last-now)*time.Microsecond + time.Millisecond
}

// hold gives the call at index at of q (-1: none) its place, due after
// retry, and returns its ticket; or, when retry is beyond wait or q is
// full, frees its place and returns 0.
func (q *memoryQueue) hold(at int, now int64, retry, wait time.Duration) int64 {
	if retry > wait || at < 0 && len(q.places) >= MaxQueue {
		if at >= 0 {
			q.places = append(q.places[:at], q.places[at+1:]...)
		}
		return 0
	}
	due := now + retry.Microseconds()
	if at >= 0 {
		q.places[at].due = due
		return q.places[at].ticket
	}
	ticket := now
	if n := len(q.places); n > 0 && q.places[n-1].ticket >= now {
		ticket = q.places[n-1].ticket + 1
	}
	q.places = append(q.places, place{ticket: ticket, due: due})
	return ticket
}
