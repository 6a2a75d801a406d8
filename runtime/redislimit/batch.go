package redislimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// batchText is the batch script as rendered: the generic decide script as
// a function, and a loop calling it for each request of the batch (see
// lua/batch.lua.tmpl); batchSource is the text sent to Redis (see
// sendable).
var (
	batchText   = renderScript("batch.lua.tmpl", scriptData{Generic: true})
	batchSource = sendable(batchText)
)

// batchScript is run like decideScript, with EVALSHA falling back to EVAL.
var batchScript = redis.NewScript(batchSource)

// The states of a batched call, guarded by batcher.mu.
const (
	callQueued  = iota // waiting in the queue
	callLeading        // its goroutine is to send the next batch
	callSent           // in a batch on its way to Redis
	callDone           // decided (or failed): d and err are set
)

// batchCall is one Allow waiting for, or in, a batch.
type batchCall struct {
	req   *ratelimit.Request
	state int
	// wake is signalled once: when the call is made the leader, or done.
	wake chan struct{}
	d    ratelimit.Decision
	err  error
}

// batcher groups concurrent calls of a limiter into one script run. The
// calls that arrive while a call or batch is in flight queue, and when it
// returns, the first of them becomes the leader that sends the next
// batch, so every goroutine sends at most one batch. A queued call waits
// for that at most linger: then it leads a batch of its own, sent while
// the other is still in flight, so that no call waits for two round trips.
type batcher struct {
	l      *redisBackend
	max    int
	linger time.Duration
	// after waits; tests replace it.
	after func(time.Duration) <-chan time.Time

	mu    sync.Mutex
	queue []*batchCall
	busy  bool // a call or batch is in flight or about to be; false only when the queue is empty
}

// newBatcher returns the batcher of l, which sends batches of at most max
// calls with client, or nil when batching is off or client's keys may
// live on several nodes.
func newBatcher(l *redisBackend, client redis.UniversalClient, max int) *batcher {
	c, ok := client.(*redis.Client)
	if max < 2 || !ok {
		return nil
	}
	return &batcher{l: l, max: max, linger: batchLinger(c.Options().ReadTimeout), after: time.After}
}

// batchLinger is how long a queued call waits for the call or batch in
// flight before it is sent in a batch of its own: a tenth of the client's
// ReadTimeout (of go-redis's default, 5s, when reads have no timeout), so
// a batched call waits at most 1.1 times the ReadTimeout.
func batchLinger(readTimeout time.Duration) time.Duration {
	if readTimeout <= 0 {
		readTimeout = 5 * time.Second
	}
	return readTimeout / 10
}

// allow decides req, which is valid, in a batch. An error is the client's,
// a malformed reply, the request's own error reply, or ctx's end.
func (b *batcher) allow(ctx context.Context, req *ratelimit.Request) (ratelimit.Decision, error) {
	b.mu.Lock()
	if !b.busy {
		// Nothing in flight: the call goes at once, on the plain script,
		// and queues nothing (the common case, kept free of allocations).
		b.busy = true
		b.mu.Unlock()
		d, err := b.l.decide(ctx, req)
		b.done(nil)
		return d, err
	}
	r := *req // a copy, so that a call that goes alone keeps req off the heap
	c := &batchCall{req: &r, wake: make(chan struct{}, 1)}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	if err := b.await(ctx, c); err != nil {
		return ratelimit.Decision{}, err
	}
	if c.state == callDone {
		return c.d, c.err
	}
	b.send(ctx, c)
	return c.d, c.err
}

// await waits until the queued call c is done or is to lead a batch, and
// makes it the leader when it has waited linger. It returns an error when
// ctx ends before c is done, unless c's batch is yet to be sent.
func (b *batcher) await(ctx context.Context, c *batchCall) error {
	linger := b.after(b.linger)
	for {
		select {
		case <-c.wake:
			return nil
		case <-linger:
			linger = nil
			if b.lead(c) {
				return nil
			}
			// In another's batch on its way: wait for it.
		case <-ctx.Done():
			if b.abandon(c) {
				return fmt.Errorf("gave up waiting for a batched decision: %w", ctx.Err())
			}
			return nil // decided meanwhile: a decision is better than an error
		}
	}
}

// lead makes the queued call c the leader of the next batch, unless it is
// in a batch already (it returns false then).
func (b *batcher) lead(c *batchCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch c.state {
	case callQueued:
		b.queue = slices.DeleteFunc(b.queue, func(q *batchCall) bool { return q == c })
		c.state = callLeading
		return true
	case callLeading:
		return true // made the leader meanwhile; its wake is left unread
	}
	return false
}

// abandon takes c, whose context ended, out of the batching, unless it is
// done already (it returns false then). A queued call leaves the queue
// undecided; a call in flight may still be decided, and charged.
func (b *batcher) abandon(c *batchCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch c.state {
	case callDone:
		return false
	case callQueued:
		b.queue = slices.DeleteFunc(b.queue, func(q *batchCall) bool { return q == c })
	case callLeading:
		if next := b.handOff(); next != nil {
			next.wake <- struct{}{}
		}
	}
	return true
}

// handOff makes the first queued call the leader, taking it out of the
// queue, and returns it, or records that nobody leads when the queue is
// empty. b.mu is held.
func (b *batcher) handOff() *batchCall {
	if len(b.queue) == 0 {
		b.busy = false
		return nil
	}
	next := b.queue[0]
	b.queue = slices.Delete(b.queue, 0, 1)
	next.state = callLeading
	return next
}

// send decides a batch of self, the leader, and the first max-1 queued
// calls, then wakes them.
func (b *batcher) send(ctx context.Context, self *batchCall) {
	b.mu.Lock()
	n := min(len(b.queue), b.max-1)
	calls := make([]*batchCall, n+1)
	calls[0] = self
	copy(calls[1:], b.queue[:n])
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	for _, c := range calls {
		c.state = callSent
	}
	b.mu.Unlock()

	if n == 0 {
		// Alone: the plain script, on the caller's own context.
		self.d, self.err = b.l.decide(ctx, self.req)
	} else {
		// No waiter's context may cancel the others' decisions.
		b.l.decideBatch(context.WithoutCancel(ctx), calls)
	}

	b.done(calls)
	for _, c := range calls[1:] {
		c.wake <- struct{}{}
	}
}

// done ends the batch in flight, whose calls are decided, and wakes the
// first queued call to lead the next one.
func (b *batcher) done(calls []*batchCall) {
	b.mu.Lock()
	for _, c := range calls {
		c.state = callDone
	}
	next := b.handOff()
	b.mu.Unlock()
	if next != nil {
		next.wake <- struct{}{}
	}
}

// planBatch returns the script written for batches of the single limit all
// calls have, or nil when they do not all have the same single limit (or
// the bound on such scripts is reached).
func (l *redisBackend) planBatch(calls []*batchCall) *redis.Script {
	if l.genericOnly || len(calls[0].req.Limits) != 1 || calls[0].req.Limits[0].Calendar != "" {
		return nil
	}
	p := planOf(calls[0].req.Limits[0])
	for _, c := range calls[1:] {
		if len(c.req.Limits) != 1 || planOf(c.req.Limits[0]) != p {
			return nil
		}
	}
	return planBatchScript(p)
}

// decideBatch runs a batch script for calls, whose requests are valid,
// and sets each call's decision or error: the client's error or a
// malformed reply fails them all, a request's error reply only itself.
func (l *redisBackend) decideBatch(ctx context.Context, calls []*batchCall) {
	keys := make([]string, 0, len(calls))
	args := make([]any, 1, 1+8*len(calls))
	args[0] = len(calls)
	now := l.now()
	script := l.planBatch(calls)
	if script != nil {
		for _, c := range calls {
			name, _ := c.req.Line(0)
			keys = append(keys, storageKey(l.prefix, name, keyOf(c.req, 0), 0, c.req.Limits[0].AlgorithmOrDefault()))
			args = append(args, c.req.UnitsOf(0), now)
		}
	} else {
		script = batchScript
		for _, c := range calls {
			args = append(args, len(c.req.Limits), 0)
			start := len(args)
			keys, args = l.appendCall(keys, args, c.req, now)
			args[start-1] = len(args) - start // the request's argument count
		}
	}
	res, err := script.Run(ctx, l.client, keys, args...).Result()
	replies, ok := res.([]any)
	if err == nil && (!ok || len(replies) != len(calls)) {
		err = &replyError{n: len(replies)}
	}
	for i, c := range calls {
		if err != nil {
			c.err = err
		} else if e, isErr := replies[i].(error); isErr {
			c.err = e
			if at, skewed := calendarSkew(e); skewed {
				c.d, c.err = l.decideAround(ctx, c.req, at)
			}
		} else {
			c.d, c.err = parseDecision(replies[i])
		}
	}
}
