package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// queueText is the queue script as rendered (see lua/queue.lua.tmpl): the
// generic decide script run in a call's turn, or as the peek that tells a
// call behind others when to come back; waitingText counts a queue's
// places.
var (
	queueText       = renderScript("queue.lua.tmpl", scriptData{Generic: true})
	queueScript     = redis.NewScript(sendable(queueText))
	queueSlotText   = renderScript("queue.lua.tmpl", scriptData{Generic: true, Slot: true})
	queueSlotScript = redis.NewScript(sendable(queueSlotText))
	waitingText     = renderScript("waiting", scriptData{})
	waitingScript   = redis.NewScript(sendable(waitingText))
)

// errQueueSlots is AllowInTurn's error for a call whose limits' keys lie
// in several hash tags of a cluster: its queue cannot be decided with them
// in one script, and the rule waits as for a limiter that queues nothing.
var errQueueSlots = fmt.Errorf("redislimit: a call whose keys lie on several cluster slots waits in its process's order: %w", errors.ErrUnsupported)

// AllowInTurn decides req when it is the call's turn in the queue of the
// calls waiting on its name and key (or keys), else tells it the soonest
// it could be admitted, in one EVALSHA of the queue script; a call that
// waits holds a place in Redis, so the processes sharing it admit their
// waiting calls in the order they began to wait (see
// [ratelimit.OpTurn]). The deny cache passes it on (a cached denial
// would keep a call out of the queue until its retry, behind calls that
// began to wait after it), so a waiting call is decided by Redis alone;
// while a circuit breaker is open the breaker decides it as a reservation
// (its refusal, and the rule's error policy: its fallback decides, and
// waits in process order). Two calls fail with an error wrapping
// errors.ErrUnsupported, and so wait in their process's order only: a
// call with a leased line (its leases admit it, as Allow does), and on a
// Redis Cluster one with a key per limit whose keys have several hash
// tags.
func (l *Limiter) AllowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	res, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTurn, Request: req, Ticket: ticket, Wait: wait})
	return res.Decision, res.Ticket, res.At, err
}

// allowInTurn is AllowInTurn in Redis, without the guards.
func (l *redisBackend) allowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, 0, time.Time{}, err
	}
	if err := l.boundQueued(&req); err != nil {
		return ratelimit.Decision{}, 0, time.Time{}, err
	}
	d, held, at, err := l.queued(ctx, req, func(at *int64) (any, error) { return l.queueRun(ctx, &req, ticket, wait, at) })
	if err == nil && l.cfg.Hook != nil && d.Source != ratelimit.SourceQueue {
		l.decided(ctx, req, d)
	}
	return d, held, at, err
}

// queued runs a queue script with run, again around the time a calendar
// skew tells, and decodes its reply: the decision, the ticket the call
// holds, and when an admitted call was charged. A failure goes to the
// hook.
func (l *redisBackend) queued(ctx context.Context, req ratelimit.Request, run func(at *int64) (any, error)) (ratelimit.Decision, int64, time.Time, error) {
	res, err := run(nil)
	if t, skewed := calendarSkew(err); skewed {
		res, err = run(&t)
	}
	var d ratelimit.Decision
	var held, at int64
	if err == nil {
		d, held, at, err = parseQueued(res)
	}
	if err != nil {
		return ratelimit.Decision{}, 0, time.Time{}, l.failed(ctx, req, err)
	}
	if !d.Allowed {
		return d, held, time.Time{}, nil
	}
	return d, held, time.UnixMicro(at), nil
}

// queueRun runs the queue script for req, with the bounds of its calendar
// periods around at (µs), or when at is nil around its time.
func (l *redisBackend) queueRun(ctx context.Context, req *ratelimit.Request, ticket int64, wait time.Duration, at *int64) (any, error) {
	now := l.now()
	keys := make([]string, 0, len(req.Limits)+2)
	args := make([]any, 0, 6+4*len(req.Limits))
	args = append(args, ticketArg(ticket), ratelimit.QueueGrace.Microseconds(), max(wait, 0).Microseconds(), ratelimit.MaxQueue)
	keys, args = l.appendCallAt(keys, args, req, now, l.boundsTime(now, at))
	order := l.queueKey(req)
	keys = append(keys, order, order+":due")
	return queueScript.Run(ctx, l.client, keys, args...).Result()
}

// ReserveSlotInTurn takes a slot of slot under token and decides req's
// rate limits, all or nothing, when it is the call's turn in its queue,
// in one EVALSHA of the queue script's slot form (see
// [ratelimit.OpTurn]); through the guards, as [Limiter.AllowInTurn] is.
func (l *Limiter) ReserveSlotInTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	op := ratelimit.Op{Kind: ratelimit.OpSlotTurn, Request: req, Slot: slot, Token: token, Ticket: ticket, Wait: wait}
	res, err := l.Do(ctx, op)
	return res.Decision, res.Ticket, res.At, err
}

// reserveSlotInTurn is ReserveSlotInTurn in Redis, without the guards. It tells
// its hook nothing but a failure: the rule does.
func (l *redisBackend) reserveSlotInTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	if len(req.Limits) > 0 {
		if err := req.Validate(); err != nil {
			return ratelimit.Decision{}, 0, time.Time{}, err
		}
	}
	req.Key = callkey.Bound(req.Key)
	run := func(at *int64) (any, error) {
		now := l.now()
		keys := make([]string, 0, len(req.Limits)+3)
		args := make([]any, 0, 9+4*len(req.Limits))
		args = append(args, ticketArg(ticket), ratelimit.QueueGrace.Microseconds(), max(wait, 0).Microseconds(), ratelimit.MaxQueue,
			slot.Threshold, lease(slot).Microseconds(), token)
		if len(req.Limits) > 0 {
			keys, args = l.appendCallAt(keys, args, &req, now, l.boundsTime(now, at))
		} else {
			args = append(args, now)
		}
		order := l.queueKey(&req)
		keys = append(keys, l.slotKey(&req), order, order+":due")
		return queueSlotScript.Run(ctx, l.client, keys, args...).Result()
	}
	return l.queued(ctx, req, run)
}

// Waiting counts the places of req's queue, and tells how long until the
// last of them is due back, in one script run that changes nothing (see
// [ratelimit.OpTurn]). It declines the calls AllowInTurn declines, and
// every call while a circuit breaker is open.
func (l *Limiter) Waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	res, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpWaiting, Request: req})
	return int(res.Count), res.Left, err
}

// waiting is Waiting in Redis, without the guards.
func (l *redisBackend) waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	if err := l.boundQueued(&req); err != nil {
		return 0, 0, err
	}
	order := l.queueKey(&req)
	res, err := waitingScript.Run(ctx, l.client, []string{order, order + ":due"}, l.now(), ratelimit.QueueGrace.Microseconds()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = &replyError{n: len(res)}
	}
	if err != nil {
		return 0, 0, l.failed(ctx, req, err)
	}
	return int(res[0]), time.Duration(res[1]) * time.Microsecond, nil
}

// boundQueued bounds req's keys as its queue's key names them (see
// queueKey), and fails with errQueueSlots when they lie in several hash
// tags of a cluster: the queue cannot be read with them in one script.
func (l *redisBackend) boundQueued(req *ratelimit.Request) error {
	req.Key = callkey.Bound(req.Key)
	if req.Keys == nil {
		return nil
	}
	req.Keys = boundKeys(req.Keys, callkey.Bound)
	if l.grouped() && l.groupsOf(req) != nil {
		return errQueueSlots
	}
	return nil
}

// ticketArg is a ticket as the queue script takes it: "" for none.
func ticketArg(ticket int64) string {
	if ticket == 0 {
		return ""
	}
	return strconv.FormatInt(ticket, 10)
}

// Dequeue frees ticket's place in req's queue with one ZREM and HDEL. See
// [ratelimit.OpTurn].
func (l *redisBackend) Dequeue(ctx context.Context, req ratelimit.Request, ticket int64) error {
	req.Key = callkey.Bound(req.Key)
	if req.Keys != nil {
		req.Keys = boundKeys(req.Keys, callkey.Bound)
	}
	order, t := l.queueKey(&req), strconv.FormatInt(ticket, 10)
	pipe := l.client.TxPipeline()
	pipe.ZRem(ctx, order, t)
	pipe.HDel(ctx, order+":due", t)
	if _, err := pipe.Exec(ctx); err != nil {
		return l.failed(ctx, req, err)
	}
	return nil
}

// queueKey returns the key of the order of req's queue, whose due times
// are under the same key with ":due" after it:
//
//	<prefix>{<name>:<key>}:queue
//
// with the hash tag of req's first limit (see storageKey), so that it
// lives with the limits' keys; a call with a key per limit adds its name
// and each key, each after its length: <prefix>{…}:queue:<name>:<n>:<key>…
func (l *redisBackend) queueKey(req *ratelimit.Request) string {
	name, _ := req.Line(0)
	tagged := storageKey(l.prefix, name, keyOf(req, 0), 0, "")
	var b strings.Builder
	b.WriteString(tagged[:strings.LastIndex(tagged, "}:")+1])
	b.WriteString(":queue")
	if req.Keys != nil {
		b.WriteByte(':')
		callkey.Escape(&b, req.Name)
		for _, k := range req.Keys {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			callkey.Escape(&b, k)
		}
	}
	return b.String()
}

// parseQueued decodes the queue script's reply: {decision, ticket,
// queued, now}.
func parseQueued(res any) (d ratelimit.Decision, held, at int64, err error) {
	v, ok := res.([]any)
	if !ok || len(v) != 4 {
		return d, 0, 0, &replyError{n: 1}
	}
	held, ok1 := v[1].(int64)
	queued, ok2 := v[2].(int64)
	at, ok3 := v[3].(int64)
	if !ok1 || !ok2 || !ok3 {
		return d, 0, 0, &replyError{n: 4}
	}
	d, err = parseDecision(v[0])
	if queued == 1 {
		d.Source = ratelimit.SourceQueue
	}
	return d, held, at, err
}
