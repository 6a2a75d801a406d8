package redislimit

import (
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitertest"
)

// TestConformance runs the conformance suite on the Redis limiter of the
// package's server: with the deny cache off, so the scripts decide every
// call, and its real outages a stopped server (see outage); with it on (a
// guard that answers repeated denials in process); with every call
// decided by the generic script; and on the server's clock, where the
// suite checks invariants. The variants run in parallel, each but the
// first on a server of its own: the suite waits on real time (periods
// running out, outages, waiting calls) far longer than it computes.
func TestConformance(t *testing.T) {
	backend := func(server func() *redistest.Server, opts ...Option) limitertest.Backend {
		return limitertest.Backend{
			New: func(t *testing.T, more ...ratelimit.Option) ratelimit.Limiter {
				return newTestRedisOn(t, server(), redisOptions(more, opts...)...)
			},
			Clock: true,
		}
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		// Its client dials once per attempt of a command: while the
		// server is down (outage, which replaces srv), go-redis's default
		// of 5 dials 100ms apart made each call of an outage take
		// seconds, which tells the cross nothing.
		b := limitertest.Backend{
			New: func(t *testing.T, more ...ratelimit.Option) ratelimit.Limiter {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr, DialerRetries: 1})
				return newTestRedisWith(t, srv, c, redisOptions(more)...)
			},
			Clock:  true,
			Outage: outage,
		}
		limitertest.Run(t, b)
	})
	t.Run("redis/deny_cache", func(t *testing.T) {
		t.Parallel()
		limitertest.Run(t, backend(ownServer(t), WithDenyCache(DefaultDenyCache)))
	})
	t.Run("redis/generic", func(t *testing.T) {
		t.Parallel()
		limitertest.Run(t, backend(ownServer(t), withGenericScript()))
	})
	t.Run("redis/server_clock", func(t *testing.T) {
		t.Parallel()
		b := backend(ownServer(t))
		b.Clock = false
		limitertest.Run(t, b)
	})
}

// ownServer starts a server for t alone, stopped when t ends, and returns
// a function that returns it.
func ownServer(t *testing.T) func() *redistest.Server {
	s, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return func() *redistest.Server { return s }
}

// outage stops the package's server for a conformance cross of a real
// outage, and returns the function that starts a new one on its address,
// without the state it had (as a restarted server without persistence
// comes back), for the tests after it; the test's end starts it if the
// cross did not.
func outage(t *testing.T) (restore func()) {
	addr := srv.Addr
	srv.Stop()
	var once sync.Once
	restore = func() {
		once.Do(func() {
			s, err := redistest.StartOn(addr)
			if err != nil {
				t.Fatalf("restarting the server on %s: %v", addr, err)
			}
			srv = s
		})
	}
	t.Cleanup(restore)
	return restore
}

// conformance runs the conformance suite on the cluster, with the
// limiter's default guards (its deny cache on).
func (ct *clusterTest) conformance(t *testing.T) {
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			l, _ := ct.limiter(t, redisOptions(opts)...)
			return l
		},
		Clock: true,
	})
}

// TestConformanceSentinel runs the conformance suite on a failover client
// of a primary, a replica and a redis-sentinel.
func TestConformanceSentinel(t *testing.T) {
	t.Parallel() // see TestCluster
	d, err := redistest.StartSentinel(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			c := d.Client()
			t.Cleanup(func() { c.Close() })
			if err := c.FlushAll(t.Context()).Err(); err != nil {
				t.Fatalf("FLUSHALL: %v", err)
			}
			return newTest(c, redisOptions(opts, withoutHeartbeat())...)
		},
		Clock: true,
	})
}
