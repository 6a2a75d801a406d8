package redislimit

import (
	"sync"
	"testing"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitertest"
)

// TestConformance runs the conformance suite on the Redis limiter of the
// package's server: with the deny cache off, so the scripts decide every
// call, and its real outages a stopped server (see outage); with it on (a guard that answers repeated denials in process);
// with every call decided by the generic script; and on the server's
// clock, where the suite checks invariants.
func TestConformance(t *testing.T) {
	backend := func(opts ...Option) limitertest.Backend {
		return limitertest.Backend{
			New: func(t *testing.T, more ...ratelimit.Option) ratelimit.Limiter {
				return newTestRedis(t, redisOptions(more, opts...)...)
			},
			Clock: true,
		}
	}
	t.Run("redis", func(t *testing.T) {
		b := backend()
		b.Outage = outage
		limitertest.Run(t, b)
	})
	t.Run("redis/deny_cache", func(t *testing.T) { limitertest.Run(t, backend(WithDenyCache(DefaultDenyCache))) })
	t.Run("redis/generic", func(t *testing.T) { limitertest.Run(t, backend(withGenericScript())) })
	t.Run("redis/server_clock", func(t *testing.T) {
		b := backend()
		b.Clock = false
		limitertest.Run(t, b)
	})
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
