package redislimit

import (
	"context"
	"math"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

var srv *redistest.Server

// TestMain runs the tests on a Redis server of their own, or with
// abuseEnv set, is one of the abusing processes of testAbuse. Run as
// shards (see redistest.ShardEnv), the conformance suites, the longest
// tests, each have a shard of their own.
func TestMain(m *testing.M) {
	if spec := os.Getenv(abuseEnv); spec != "" {
		os.Exit(abuse(spec))
	}
	if spec := os.Getenv(slotsEnv); spec != "" {
		os.Exit(slotsProcess(spec))
	}
	if spec := os.Getenv(queueEnv); spec != "" {
		os.Exit(queueProcess(spec))
	}
	if spec := os.Getenv(hotKeyEnv); spec != "" {
		os.Exit(hotKey(spec))
	}
	redistest.Main(m, &srv, "TestConformance", "TestClusterConformance", "TestConformanceSentinel")
}

// manualClock is a Clock that moves only when told (see clocktest).
type manualClock = clocktest.Manual

func newManualClock() *manualClock { return clocktest.NewManual() }

// backend is a limiter under test with a way to reach its state.
type backend struct {
	name string
	new  func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter
}

// backends returns both limiters; the Redis one runs against a flushed
// real server and closes its client when the test ends.
func backends() []backend {
	return []backend{
		{"memory", func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter { return ratelimit.NewMemory(opts...) }},
		{"redis", func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			return newTestRedis(t, redisOptions(opts)...)
		}},
		{"redis-generic", func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			return newTestRedis(t, redisOptions(opts, withGenericScript())...)
		}},
	}
}

// newTestRedis returns a Redis limiter on the flushed test server. Its deny
// cache is off unless opts turn it on, so that the tests of the scripts
// see every decision the scripts make; the deny cache's tests (see
// denycache_test.go) compare it with the twin on their own.
func newTestRedis(t testing.TB, opts ...Option) *Limiter {
	return newTestRedisOn(t, srv, opts...)
}

// newTestRedisOn is newTestRedis on s.
func newTestRedisOn(t testing.TB, s *redistest.Server, opts ...Option) *Limiter {
	return newTestRedisWith(t, s, s.Client(), opts...)
}

// newTestRedisWith is newTestRedisOn with c, a client of s, which is
// closed when t ends.
func newTestRedisWith(t testing.TB, s *redistest.Server, c *redis.Client, opts ...Option) *Limiter {
	s.Flush(t)
	t.Cleanup(func() { c.Close() })
	return newTest(c, append([]Option{WithDenyCache(0), withoutHeartbeat()}, opts...)...)
}

// redisOptions returns opts, then more, as the options of a Limiter.
func redisOptions(opts []ratelimit.Option, more ...Option) []Option {
	all := make([]Option, 0, len(opts)+len(more))
	for _, o := range opts {
		all = append(all, o)
	}
	return append(all, more...)
}

func forEachBackend(t *testing.T, f func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f(t, func(opts ...ratelimit.Option) ratelimit.Limiter { return b.new(t, opts...) })
		})
	}
}

func allow(t *testing.T, l ratelimit.Limiter, req ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), req)
	require.NoError(t, err)
	return d
}

func rdb(t testing.TB) *redis.Client {
	c := srv.Client()
	t.Cleanup(func() { c.Close() })
	return c
}

// newUnreachableClient returns a client of a loopback port nobody listens on.
func newUnreachableClient(t testing.TB) *redis.Client { return redistest.Unreachable(t) }

// fewestAllocs returns how many allocations a call of f makes on
// average, as testing.AllocsPerRun does, but robust to the goroutines
// running beside it (heartbeats, probes, the goroutines earlier tests
// left), whose allocations AllocsPerRun counts too: it measures runs of
// ten calls, and since the other goroutines only ever add to a run's
// count, the fewest a run made, once 20 runs made it, is f's own. It
// samples for at most a minute.
func fewestAllocs(f func()) float64 {
	const calls = 10
	f() // warm up: pools, connections, loaded scripts
	var before, after runtime.MemStats
	fewest, times := uint64(math.MaxUint64), 0
	for deadline := time.Now().Add(time.Minute); times < 20 && time.Now().Before(deadline); {
		runtime.ReadMemStats(&before)
		for range calls {
			f()
		}
		runtime.ReadMemStats(&after)
		switch n := after.Mallocs - before.Mallocs; {
		case n < fewest:
			fewest, times = n, 1
		case n == fewest:
			times++
		}
	}
	return float64(fewest) / calls
}
