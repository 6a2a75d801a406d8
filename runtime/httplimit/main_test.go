package httplimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var srv *redistest.Server

// TestMain runs the tests on a Redis server of their own.
func TestMain(m *testing.M) { redistest.Main(m, &srv) }

func newManualClock() *clocktest.Manual { return clocktest.NewManual() }

func perPeriod(n int64, period time.Duration) []ratelimit.Limit {
	return []ratelimit.Limit{{Period: period, Threshold: n}}
}

// forEachBackend runs f with the memory limiter and with the Redis limiter
// on the flushed test server (its deny cache off, so that every decision
// is the script's).
func forEachBackend(t *testing.T, f func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter)) {
	t.Run("memory", func(t *testing.T) {
		f(t, func(opts ...ratelimit.Option) ratelimit.Limiter { return ratelimit.NewMemory(opts...) })
	})
	t.Run("redis", func(t *testing.T) {
		f(t, func(opts ...ratelimit.Option) ratelimit.Limiter {
			srv.Flush(t)
			c := srv.Client()
			t.Cleanup(func() { c.Close() })
			redisOpts := []redislimit.Option{redislimit.WithDenyCache(0)}
			for _, o := range opts {
				redisOpts = append(redisOpts, o)
			}
			return redislimit.New(c, redisOpts...)
		})
	})
}

// wrapped is a Wrapper of the limiter it holds.
type wrapped struct{ ratelimit.Limiter }

func (w wrapped) Unwrap() ratelimit.Limiter { return w.Limiter }

// newUnreachableClient returns a client of a loopback port nobody listens on.
func newUnreachableClient(t testing.TB) *redis.Client { return redistest.Unreachable(t) }
