package redislimit

import (
	"context"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Peek runs the generic decide script for req with every admitting check
// rolled back, in one round trip (on a Redis Cluster, one per key of a
// request with a key per limit, concurrently; of a request with a
// concurrency limit, one run of the reserve slot script, see [Limiter.PeekSlot]): the same checks as Allow's, on the
// server's clock (or the limiter's [ratelimit.WithClock]), so it decides as Allow
// would. It bypasses the circuit breaker and the batching; an error wraps
// [ratelimit.ErrBackend]. See [ratelimit.Peek].
func (l *redisBackend) Peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	for _, lim := range req.Limits {
		if lim.Algorithm == limitfacts.Concurrency {
			return ratelimit.Peek(ctx, l, req) // by PeekSlot, with the slot's numbers
		}
	}
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, err
	}
	req.Key = callkey.Named(req.Key)
	if req.Keys != nil {
		return l.peekKeys(ctx, req)
	}
	return l.peekOne(ctx, &req)
}

// peekOne is Peek for a valid request, with its keys named, decided by one
// script run (two when a calendar period's bounds miss the server's time).
func (l *redisBackend) peekOne(ctx context.Context, req *ratelimit.Request) (ratelimit.Decision, error) {
	stored, args := l.appendCall(nil, nil, req, l.now())
	res, err := decideScript.Run(ctx, l.client, stored, withPeek(args, len(req.Limits))...).Result()
	if at, skewed := calendarSkew(err); skewed {
		stored, args = l.appendCallAt(nil, nil, req, l.now(), at)
		res, err = decideScript.Run(ctx, l.client, stored, withPeek(args, len(req.Limits))...).Result()
	}
	if err != nil {
		return ratelimit.Decision{}, backendError(req.Name, err)
	}
	d, err := parseDecision(res)
	if err != nil {
		return ratelimit.Decision{}, backendError(req.Name, err)
	}
	if d.Allowed {
		d.Remaining += req.UnitsOf(d.LimitIndex) // Remaining before the call, as [ratelimit.Peek] says
	}
	return d, nil
}

// Reset resets name and key through the limiter's guards: the backend's
// Reset; then the local fallback ([ratelimit.FailLocal]) forgets the state
// it holds for them (and what it admitted that was to be charged to
// Redis), and the deny cache ([WithDenyCache]) the denials it remembers
// for name (of every key: theirs are asked of Redis again).
// Other processes' deny caches are not told: each may keep denying the key
// for at most the deny hold ([WithDenyHold]), and so may this process for
// a call in flight during the Reset whose denial it remembers after. See
// [redisBackend.Reset] and [ratelimit.OpReset].
func (l *Limiter) Reset(ctx context.Context, name, key string) error {
	return l.leases.Reset(ctx, name, key)
}

// Reset deletes every Redis key that name and key may hold (of a rule
// with a key per limit, the state of its limits keyed by key: "" names
// its limits that count every call as one), its concurrency slots among
// them (the calls holding one run on; their give-back and renewal then
// find none) and its cooldowns (each limit
// index below [ratelimit.MaxLimits], each algorithm) with one UNLINK, in one round
// trip: the keys share a hash tag, so a cluster holds them on one master.
// An error wraps [ratelimit.ErrBackend].
func (l *redisBackend) Reset(ctx context.Context, name, key string) error {
	key = callkey.Named(key)
	if err := l.client.Unlink(ctx, resetKeys(l.prefix, name, key)...).Err(); err != nil {
		return backendError(name, err)
	}
	return nil
}

// resetKeys returns every storage key of name and key, which is bounded.
func resetKeys(prefix, name, key string) []string {
	algs := ratelimit.Algorithms()
	keys := make([]string, 0, ratelimit.MaxLimits*(len(algs)+1)+1)
	for i := range ratelimit.MaxLimits {
		for _, alg := range algs {
			keys = append(keys, storageKey(prefix, name, key, i, alg))
		}
		keys = append(keys, coolKey(prefix, name, key, i))
	}
	return append(keys, slotKey(prefix, name, key))
}
