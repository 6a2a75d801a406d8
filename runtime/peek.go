package ratelimit

import (
	"context"
	"errors"
	"fmt"
)

// Peeker is a [Limiter] that can tell how it would decide a call without
// charging it: [RedisLimiter] and [MemoryLimiter].
type Peeker interface {
	// Peek returns the decision Allow would return for req now, without
	// charging any limit: Allowed, RetryAfter, Delay and Limit as Allow's,
	// and ResetAfter as Allow's (for an admitted call, counting the call).
	// Remaining is the units the limit at index Limit has left now, before
	// the call: Allow's Remaining plus the cost when admitted (after 2 of
	// 3 calls, a Peek of cost 1 admits with 1 remaining). It reports
	// nothing to the limiter's hook.
	//
	// A Peek changes no later decision. Like Allow, it drops what no longer
	// counts at its time (a log's old entries, an ended window), as a
	// later call would; only a clock that steps back ([WithClock], in
	// tests) could tell the difference.
	Peek(ctx context.Context, req Request) (Decision, error)
}

// Resetter is a [Limiter] that can forget the calls of a name and key:
// [RedisLimiter] and [MemoryLimiter].
type Resetter interface {
	// Reset clears the state of every limit of the calls named name with
	// the per-call key key, so that the next call starts afresh.
	Reset(ctx context.Context, name, key string) error
}

// Peek asks the [Peeker] that limiter is, or wraps through any number of
// [Wrapper]s, how it would decide req now; see [Peeker]. The error wraps
// errors.ErrUnsupported when there is none.
func Peek(ctx context.Context, limiter Limiter, req Request) (Decision, error) {
	p, ok := limiter.(Peeker)
	if !ok {
		if p, ok = innermost(limiter).(Peeker); !ok {
			return Decision{}, fmt.Errorf("ratelimit: %T cannot peek: %w", limiter, errors.ErrUnsupported)
		}
	}
	return p.Peek(ctx, req)
}

// Reset has the [Resetter] that limiter is, or wraps through any number of
// [Wrapper]s, clear the state of name and key; see [Resetter]. The error
// wraps errors.ErrUnsupported when there is none.
func Reset(ctx context.Context, limiter Limiter, name, key string) error {
	r, ok := limiter.(Resetter)
	if !ok {
		if r, ok = innermost(limiter).(Resetter); !ok {
			return fmt.Errorf("ratelimit: %T cannot reset: %w", limiter, errors.ErrUnsupported)
		}
	}
	return r.Reset(ctx, name, key)
}

// peeked turns the decision an uncharged call of req got into Peek's: an
// admitted call's Remaining counts its cost too.
func peeked(req *Request, d Decision) Decision {
	if d.Allowed {
		d.Remaining += req.cost()
	}
	return d
}

// Peek checks req's limits without charging them. See [Peeker].
func (l *MemoryLimiter) Peek(_ context.Context, req Request) (Decision, error) {
	key, hash, err := l.locate(&req)
	if err != nil {
		return Decision{}, err
	}
	now := l.now()
	shard := l.shardOf(hash)
	shard.mu.Lock()
	e := shard.find(req.Name, key, hash)
	if e == nil {
		e = &memoryEntry{} // a new pair's state, not kept
	}
	if len(e.limits) < len(req.Limits) {
		e.limits = append(e.limits, make([]limitState, len(req.Limits)-len(e.limits))...)
	}
	var d Decision
	e.decide(&req, now, false, &d)
	shard.mu.Unlock()
	return peeked(&req, d), nil
}

// Reset forgets the state of name and key. See [Resetter].
func (l *MemoryLimiter) Reset(_ context.Context, name, key string) error {
	key = boundKey(key)
	hash := l.hashOf(name, key, nil)
	shard := l.shardOf(hash)
	shard.mu.Lock()
	shard.remove(name, key, hash)
	shard.mu.Unlock()
	return nil
}

// Peek runs the generic decide script for req with every admitting check
// rolled back, in one round trip: the same checks as Allow's, on the
// server's clock (or the limiter's [WithClock]), so it decides as Allow
// would. It bypasses the circuit breaker and the batching; an error wraps
// [ErrBackend]. See [Peeker].
func (l *RedisLimiter) Peek(ctx context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	req.Key = boundKey(req.Key)
	keys, args := l.appendCall(nil, nil, &req, l.now())
	res, err := decideScript.Run(ctx, l.client, keys, append(args, "peek")...).Result()
	if err != nil {
		return Decision{}, &BackendError{Name: req.Name, Err: err}
	}
	d, err := parseDecision(res)
	if err != nil {
		return Decision{}, &BackendError{Name: req.Name, Err: err}
	}
	return peeked(&req, d), nil
}

// Reset deletes every Redis key that name and key may hold (each limit
// index below [MaxLimits], each algorithm) with one UNLINK, in one round
// trip: the keys share a hash tag, so a cluster holds them on one master.
// It also forgets the state the local fallback ([FailLocal]) holds for
// them, and the denials this process's deny cache ([WithDenyCache])
// remembers for name (of every key: theirs are asked of Redis again). An
// error wraps [ErrBackend]. See [Resetter].
//
// Other processes' deny caches are not told: each may keep denying the key
// until the RetryAfter Redis gave it for its last denial runs out (that
// long at most), and so may this process for a call in flight during the
// Reset whose denial it remembers after. Turn the cache off
// (WithDenyCache(0)) where a Reset must lift a limit everywhere at once.
func (l *RedisLimiter) Reset(ctx context.Context, name, key string) error {
	key = boundKey(key)
	if err := l.client.Unlink(ctx, resetKeys(l.prefix, name, key)...).Err(); err != nil {
		return &BackendError{Name: name, Err: err}
	}
	if l.denials != nil {
		l.denials.forget(name)
	}
	return l.local.Reset(ctx, name, key)
}

// resetKeys returns every storage key of name and key, which is bounded.
func resetKeys(prefix, name, key string) []string {
	algs := Algorithms()
	keys := make([]string, 0, MaxLimits*len(algs))
	for i := range MaxLimits {
		for _, alg := range algs {
			keys = append(keys, storageKey(prefix, name, key, i, alg))
		}
	}
	return keys
}

var (
	_ Peeker   = (*RedisLimiter)(nil)
	_ Resetter = (*RedisLimiter)(nil)
	_ Peeker   = (*MemoryLimiter)(nil)
	_ Resetter = (*MemoryLimiter)(nil)
)
