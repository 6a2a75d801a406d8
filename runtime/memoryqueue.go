package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// The memory limiter's queues of waiting calls (see [OpTurn]): one per
// name and key (or keys) with calls waiting, in shards by the pair's hash.
// A shard's lock is also held while a call of its pairs is decided in its
// turn, so that no call is decided past a waiting one; calls of pairs
// with nobody waiting allocate nothing.
type memoryQueues struct {
	shards [shardCount]queueShard
}

// queueShard is the queues of the pairs of one hash shard.
type queueShard struct {
	mu sync.Mutex
	m  map[queueID]queue
}

// queue is the places of one queue, in the order of their tickets.
type queue []place

// place is a waiting call's place: its ticket, and when (µs) it was told
// to come back.
type place struct{ ticket, due int64 }

// queueID names the queue of a request's calls: its name and key, or its
// keys (callkey.Join) when it has a key per limit.
type queueID struct {
	name, key string
	perLimit  bool
}

// queueOf returns the shard and the name of req's queue.
func (l *MemoryLimiter) queueOf(req *Request) (*queueShard, queueID) {
	id := queueID{name: req.Name, key: req.Key}
	if req.Keys != nil {
		id.key, id.perLimit = callkey.Join(req.Keys), true
	}
	return &l.queues.shards[l.hashOf(id.name, id.key, l.keptRuleOf(req))%shardCount], id
}

// AllowInTurn decides req when it is the call's turn, else denies it with
// the soonest it could be admitted; a call that waits holds a place. See
// [OpTurn].
func (l *MemoryLimiter) AllowInTurn(ctx context.Context, req Request, ticket int64, wait time.Duration) (Decision, int64, time.Time, error) {
	// decide validates req (as Allow does), and the peek of a call behind
	// others too, before the call takes a place.
	decide := func() (d Decision, charged int64, err error) {
		if req.Keys != nil {
			charged, err = l.decideKeys(ctx, &req, true, 0, &d)
			return d, charged, err
		}
		return l.reserve(ctx, req, true, 0)
	}
	return l.inTurn(ctx, &req, ticket, wait, nil, decide)
}

// ReserveSlotInTurn is ReserveSlot in the call's turn. See [OpTurn].
func (l *MemoryLimiter) ReserveSlotInTurn(ctx context.Context, req Request, slot Limit, token string, ticket int64, wait time.Duration) (Decision, int64, time.Time, error) {
	if len(req.Limits) > 0 { // a call behind others takes its place before any peek
		if err := req.Validate(); err != nil {
			return Decision{}, 0, time.Time{}, err
		}
	}
	decide := func() (Decision, int64, error) { return l.reserveSlot(ctx, req, slot, token) }
	return l.inTurn(ctx, &req, ticket, wait, &slot, decide)
}

// inTurn decides req with decide when it is the call's turn, else denies
// it with the soonest its rate limits could admit it; a call that waits
// holds a place. slot is the concurrency limit the call takes a slot of,
// nil for none: a call behind n others has its turn too when more than n
// slots are free and its rate limits would admit it behind them, and one
// denied for want of a slot comes back as SlotPoll says.
func (l *MemoryLimiter) inTurn(ctx context.Context, req *Request, ticket int64, wait time.Duration, slot *Limit, decide func() (Decision, int64, error)) (Decision, int64, time.Time, error) {
	qs, id := l.queueOf(req)
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q := qs.m[id] // nil when nobody waits: kept only when the call takes a place
	var now int64 // read when the queue or a denial needs it
	if len(q) > 0 {
		now = l.now()
		q.expire(now)
	}
	at := q.find(ticket)
	ahead := at // the places ahead of the call's
	if at < 0 {
		ahead = len(q)
	}
	slotIndex, slots := -1, int64(0)
	if slot != nil {
		slotIndex, slots = len(req.Limits), slot.Threshold
	}
	var d Decision
	turn := ahead == 0
	if !turn {
		var err error
		if d, err = req.Behind(ctx, l, ahead, q.lastDue(ahead, now), slot, wait); err != nil {
			return Decision{}, 0, time.Time{}, err
		}
		turn = slot != nil && d.LimitIndex == slotIndex && l.freeSlots(req, slots) > int64(ahead)
	}
	back := time.Duration(0) // when the call is to come back, if not its RetryAfter
	if turn {
		var charged int64
		var err error
		if d, charged, err = decide(); err != nil {
			return Decision{}, 0, time.Time{}, err
		}
		if d.Allowed {
			if at >= 0 {
				q = append(q[:at], q[at+1:]...)
			}
			qs.keep(id, q)
			return d, 0, time.UnixMicro(charged), nil
		}
		if d.LimitIndex == slotIndex { // it polls, until its wait is over
			back = limitfacts.Poll(ahead, slots, wait)
		}
	}
	if back == 0 {
		back = d.RetryAfter
	}
	if now == 0 {
		now = l.now()
	}
	held := q.hold(at, now, back, wait)
	qs.keep(id, q)
	return d, held, time.Time{}, nil
}

// Dequeue frees ticket's place in req's queue. See [OpTurn].
func (l *MemoryLimiter) Dequeue(_ context.Context, req Request, ticket int64) error {
	qs, id := l.queueOf(&req)
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q := qs.m[id]; q != nil {
		if at := q.find(ticket); at >= 0 {
			qs.keep(id, append(q[:at], q[at+1:]...))
		}
	}
	return nil
}

// Waiting returns how many calls hold a place in req's queue, and how
// long until the last of them is due back. See [OpTurn].
func (l *MemoryLimiter) Waiting(_ context.Context, req Request) (int, time.Duration, error) {
	qs, id := l.queueOf(&req)
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q, now := qs.m[id], l.now()
	q.expire(now) // of this copy: the next call in the queue drops them
	return len(q), q.lastDue(len(q), now), nil
}

// keep keeps q as id's queue while calls wait in it, and drops it then.
func (qs *queueShard) keep(id queueID, q queue) {
	switch {
	case len(q) == 0:
		delete(qs.m, id)
	case qs.m == nil:
		qs.m = map[queueID]queue{id: q}
	default:
		qs.m[id] = q
	}
}

// expire drops the places at the head of q whose holders did not come
// back within QueueGrace of their due time.
func (q *queue) expire(now int64) {
	for len(*q) > 0 && (*q)[0].due+QueueGrace.Microseconds() < now {
		*q = (*q)[1:]
	}
}

// find returns ticket's index in q, or -1.
func (q queue) find(ticket int64) int {
	if ticket == 0 {
		return -1
	}
	for i, p := range q {
		if p.ticket == ticket {
			return i
		}
	}
	return -1
}

// lastDue returns how long after now the last of the first n places is
// due, 0 when that is past.
func (q queue) lastDue(n int, now int64) time.Duration {
	last := now
	for _, p := range q[:n] {
		last = max(last, p.due)
	}
	return time.Duration(last-now) * time.Microsecond
}

// hold gives the call at index at of q (-1: none) its place, due after
// retry (when it is to come back), and returns its ticket; or, when retry
// is beyond wait or q is full, frees its place and returns 0.
func (q *queue) hold(at int, now int64, retry, wait time.Duration) int64 {
	if retry > wait || at < 0 && len(*q) >= MaxQueue {
		if at >= 0 {
			*q = append((*q)[:at], (*q)[at+1:]...)
		}
		return 0
	}
	due := now + retry.Microseconds()
	if at >= 0 {
		(*q)[at].due = due
		return (*q)[at].ticket
	}
	ticket := now
	if n := len(*q); n > 0 && (*q)[n-1].ticket >= now {
		ticket = (*q)[n-1].ticket + 1
	}
	*q = append(*q, place{ticket: ticket, due: due})
	return ticket
}
