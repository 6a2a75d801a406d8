package ratelimit

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RedisLimiter decides calls in Redis with one script round trip each (or,
// with [WithBatching], several concurrent calls per round trip). The
// script reads the Redis server's clock, so every process sharing the
// server shares one consistent window whatever its own clock says. It works
// with a single server, a failover client and a Redis Cluster: all keys of
// one call share a hash tag.
//
// Scripts: a call of one limit runs a script written for that limit, its
// values built in, so the server parses no arguments and runs only that
// algorithm's code; calls of several limits, batches, and limits beyond
// the first 1,024 distinct ones of the process (overrides can make many)
// run one generic script that takes the limits as arguments. Each script is
// loaded into Redis's script cache on its first use. A window limit's own
// script reads the server's clock through its key's TTL, which ends a
// second after the window, and reads TIME only when a window starts.
//
// Memory: a sliding-log limit keeps one list entry (about 10 bytes) per
// admitted unit in its window, and its key expires one second after its
// window empties; a window's key a second after its window (a sliding
// window: the next) ends, a bucket's a second after it is full.
//
// Failures: a call Redis cannot decide costs what the client spends on it:
// its dial or read timeout, times the attempts it makes (1 + MaxRetries
// for errors it retries, and DialerRetries dials per attempt, with their
// back-offs). Configure MaxRetries: -1 and DialerRetries: 1 for one
// timeout. After a few such failures in a row a circuit breaker fails the
// calls at once for a while; see [WithBreaker]. With a Redis Cluster
// client each master has its own breaker, so a master that is down fails
// only the calls whose keys it holds.
type RedisLimiter struct {
	client redis.UniversalClient
	// cluster is client when it is a Redis Cluster client.
	cluster *redis.ClusterClient
	// breaker guards every call, or for a cluster finding a call's
	// master; nil when breakers are off.
	breaker *breaker
	// nodes holds the breakers of a cluster's masters: address → *breaker.
	nodes sync.Map
	// batcher groups concurrent calls (see [WithBatching]); nil when off.
	batcher *batcher
	// local decides the calls of FailLocal rules that Redis cannot decide.
	local *MemoryLimiter
	config
}

// NewRedis returns a limiter that keeps its state in client's Redis.
func NewRedis(client redis.UniversalClient, opts ...Option) *RedisLimiter {
	c := newConfig(opts)
	l := &RedisLimiter{client: client, breaker: newBreaker(c.breaker), config: c}
	l.local = newFallback(c)
	l.cluster, _ = client.(*redis.ClusterClient)
	if _, ring := client.(*redis.Ring); c.batch > 1 && l.cluster == nil && !ring {
		l.batcher = &batcher{l: l, max: c.batch}
	}
	return l
}

// CircuitOpen reports whether a circuit breaker of the limiter is failing
// calls without asking Redis now (for a Redis Cluster, the calls of at
// least one master), as a health check may want to know.
func (l *RedisLimiter) CircuitOpen() bool {
	if l.breaker == nil {
		return false
	}
	open := l.breaker.open()
	l.nodes.Range(func(_, b any) bool {
		open = open || b.(*breaker).open()
		return !open
	})
	return open
}

// admit returns the breaker that guards the call req and whether the call
// is its probe, or the error that fails the call at once.
func (l *RedisLimiter) admit(ctx context.Context, req *Request) (*breaker, bool, error) {
	if l.breaker == nil {
		return nil, false, nil
	}
	ok, probe := l.breaker.allow()
	if !ok {
		return nil, false, ErrCircuitOpen
	}
	if l.cluster == nil {
		return l.breaker, probe, nil
	}
	// Every key of a call has the same hash tag, so the first names the
	// master of them all.
	master, err := l.cluster.MasterForKey(ctx, storageKey(l.prefix, req.Name, req.Key, 0, req.Limits[0].algorithm()))
	l.breaker.record(ctx, probe, err)
	if err != nil {
		return nil, false, err
	}
	addr := master.Options().Addr
	b, loaded := l.nodes.Load(addr)
	if !loaded {
		b, _ = l.nodes.LoadOrStore(addr, newBreaker(l.config.breaker))
	}
	nb := b.(*breaker)
	if ok, probe = nb.allow(); !ok {
		return nil, false, ErrCircuitOpen
	}
	return nb, probe, nil
}

// Allow decides req in one EVALSHA, shared with concurrent calls when
// batching is on (see [WithBatching]). See [Limiter].
func (l *RedisLimiter) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	b, probe, err := l.admit(ctx, &req)
	if err != nil {
		return Decision{}, l.failed(ctx, req, err)
	}
	var d Decision
	if l.batcher != nil {
		d, err = l.batcher.allow(ctx, &req)
	} else {
		d, err = l.decide(ctx, &req)
	}
	if b != nil {
		b.record(ctx, probe, err)
	}
	if err != nil {
		return Decision{}, l.failed(ctx, req, err)
	}
	if l.hook != nil {
		l.decided(ctx, req, d)
	}
	return d, nil
}

// decided reports d, the decision of req, to the hook. It takes req by
// value, so that only a limiter with a hook moves a request to the heap.
func (l *RedisLimiter) decided(ctx context.Context, req Request, d Decision) {
	l.hook.Decided(ctx, &req, d)
}

// failed reports a call the limiter could not decide because of cause.
func (l *RedisLimiter) failed(ctx context.Context, req Request, cause error) error {
	err := &BackendError{Name: req.Name, Err: cause}
	if l.hook != nil {
		l.hook.Failed(ctx, &req, err)
	}
	return err
}

// Key returns the Redis key that holds limit index i, of algorithm alg,
// of the calls named name with per-call key key, for inspecting state with
// redis-cli.
func (l *RedisLimiter) Key(name, key string, i int, alg Algorithm) string {
	return storageKey(l.prefix, name, key, i, alg)
}

var _ Limiter = (*RedisLimiter)(nil)
