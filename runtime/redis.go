package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisLimiter decides calls in Redis with one script round trip each (or,
// with [WithBatching], several concurrent calls per round trip), but for
// repeats of a recent denial, which its deny cache answers in process
// (see [WithDenyCache]). The
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
// back-offs); [RedisOptions] and [ClusterOptions] make it one short
// timeout. After a few such failures in a row a circuit breaker fails the
// calls at once until a background probe finds Redis back; see
// [WithBreaker]. With a Redis Cluster
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
	// denials repeats recent denials (see [WithDenyCache]); nil when off.
	denials *denyCache
	// latest is the latest time (ns) of the clock a call was sent at,
	// with [WithClock].
	latest atomic.Int64
	// local decides the calls of FailLocal rules that Redis cannot decide.
	local *MemoryLimiter
	config
}

// NewRedis returns a limiter that keeps its state in client's Redis.
func NewRedis(client redis.UniversalClient, opts ...Option) *RedisLimiter {
	c := newConfig(opts)
	l := &RedisLimiter{client: client, denials: newDenyCache(c.denyCache), config: c}
	l.local = newFallback(c)
	l.cluster, _ = client.(*redis.ClusterClient)
	l.breaker = newBreaker(c.breaker, clientAddr(client), l.probe, c.breakerHook)
	l.batcher = newBatcher(l, client, c.batch)
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

// clientAddr names the node of client's breaker for a [BreakerHook]: its
// address, "cluster" for a cluster client (whose masters have breakers of
// their own), "ring" for a ring.
func clientAddr(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return "cluster"
	case *redis.Ring:
		return "ring"
	}
	return ""
}

// probe asks Redis whether the limiter's breaker may close: with a script
// on a connection of its own (see [probeNode]), or for a cluster client
// by finding a master, which the breaker guards there.
func (l *RedisLimiter) probe(ctx context.Context) error {
	switch c := l.client.(type) {
	case *redis.ClusterClient:
		_, err := c.MasterForKey(ctx, "")
		return err
	case *redis.Client:
		return probeNode(ctx, c.Options())
	}
	return l.client.Ping(ctx).Err()
}

// admit returns the breaker that guards the call req, or the error that
// fails the call at once.
func (l *RedisLimiter) admit(ctx context.Context, req *Request) (*breaker, error) {
	if l.breaker == nil {
		return nil, nil
	}
	if !l.breaker.allow() {
		return nil, ErrCircuitOpen
	}
	if l.cluster == nil {
		return l.breaker, nil
	}
	// Every key of a call has the same hash tag, so the first names the
	// master of them all.
	key := storageKey(l.prefix, req.Name, req.Key, 0, req.Limits[0].algorithm())
	master, err := l.cluster.MasterForKey(ctx, key)
	l.breaker.record(ctx, err)
	if err != nil {
		return nil, err
	}
	addr := master.Options().Addr
	b, loaded := l.nodes.Load(addr)
	if !loaded {
		b, _ = l.nodes.LoadOrStore(addr, newBreaker(l.config.breaker, addr, l.probeMaster(key), l.breakerHook))
	}
	nb := b.(*breaker)
	if !nb.allow() {
		return nil, ErrCircuitOpen
	}
	return nb, nil
}

// probeMaster returns the probe of a cluster master's breaker: a script on
// the master that holds key, a key it held when the breaker was made. Asking
// the cluster client for the master each time finds the node's current
// client, and a master that took over key's slot.
func (l *RedisLimiter) probeMaster(key string) func(context.Context) error {
	return func(ctx context.Context) error {
		master, err := l.cluster.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		return probeNode(ctx, master.Options())
	}
}

// Allow decides req in one EVALSHA, shared with concurrent calls when
// batching is on (see [WithBatching]), or repeats a recent denial without
// asking Redis (see [WithDenyCache]). See [Limiter].
func (l *RedisLimiter) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	req.Key = boundKey(req.Key)
	var seen denyProbe
	if l.denials != nil {
		var d Decision
		var hit bool
		now, ok := l.cacheNow()
		if d, seen, hit = l.denials.lookup(&req, now); hit && ok {
			if l.hook != nil {
				l.decided(ctx, req, d)
			}
			return d, nil
		}
	}
	b, err := l.admit(ctx, &req)
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
		b.record(ctx, err)
	}
	if err != nil {
		return Decision{}, l.failed(ctx, req, err)
	}
	if !d.Allowed && l.denials != nil {
		l.denials.remember(&req, seen, d, l.cacheSlack(&req))
	}
	if l.hook != nil {
		l.decided(ctx, req, d)
	}
	return d, nil
}

// monoBase is the origin of the process's monotonic clock, for the deny
// cache and the memory limiter.
var monoBase = time.Now()

// cacheNow returns the deny cache's time in ns, and whether the cache may
// answer at it. Without a clock it is the process's monotonic clock, which
// steps with neither the wall clock nor the server's, and the cache may
// always answer. With one, it is the clock's time (at which the scripts
// decide), and the cache may answer only when no call was sent at a later
// time: such a call may have dropped state (a log's entries) that counts
// at an earlier time.
func (l *RedisLimiter) cacheNow() (int64, bool) {
	if l.clock == nil {
		return int64(time.Since(monoBase)), true
	}
	now := l.clock.Now().UnixNano()
	for {
		latest := l.latest.Load()
		if now <= latest {
			return now, now == latest
		}
		if l.latest.CompareAndSwap(latest, now) {
			return now, true
		}
	}
}

// cacheSlack is how much shorter than its RetryAfter a denial of req is
// remembered: a millisecond when a window's script may have told it from
// the start of the server's millisecond (see denyCache), else nothing.
func (l *RedisLimiter) cacheSlack(req *Request) time.Duration {
	if l.clock != nil {
		return 0
	}
	for _, lim := range req.Limits {
		if alg := lim.algorithm(); alg == FixedWindow || alg == SlidingWindow {
			return time.Millisecond
		}
	}
	return 0
}

// decided reports d, the decision of req, to the hook. It takes req by
// value, so that only a limiter with a hook moves a request to the heap.
func (l *RedisLimiter) decided(ctx context.Context, req Request, d Decision) {
	req.prep = nil // the hook sees the request as its caller could build it
	l.hook.Decided(ctx, &req, d)
}

// failed reports a call the limiter could not decide because of cause.
func (l *RedisLimiter) failed(ctx context.Context, req Request, cause error) error {
	err := &BackendError{Name: req.Name, Err: cause}
	if l.hook != nil {
		req.prep = nil
		l.hook.Failed(ctx, &req, err)
	}
	return err
}

// Key returns the Redis key that holds limit index i, of algorithm alg,
// of the calls named name with per-call key key, for inspecting state with
// redis-cli. A key whose escaped form is longer than 64 bytes appears as
// its stand-in (see [LimitError]'s Key).
func (l *RedisLimiter) Key(name, key string, i int, alg Algorithm) string {
	return storageKey(l.prefix, name, boundKey(key), i, alg)
}

var _ Limiter = (*RedisLimiter)(nil)
