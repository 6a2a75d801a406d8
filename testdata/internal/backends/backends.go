// Package backends runs the behaviour tests of the generated code in the
// testdata packages on every limiter backend: the in-process memory
// limiter and a real Redis server.
package backends

import (
	"testing"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// Each runs f as a subtest once per backend, each time with a limiter that
// has seen no calls, on a clock that stands still: the calls of a test all
// fall at one instant, however long a loaded machine takes to make them.
func Each(t *testing.T, srv *redistest.Server, f func(t *testing.T, limiter ratelimit.Limiter)) {
	t.Helper()
	each(t, srv, f, ratelimit.WithClock(stoppedClock{}))
}

// EachOnRealClock is Each on the real clock (the Redis server's), for the
// tests whose calls wait for time to pass.
func EachOnRealClock(t *testing.T, srv *redistest.Server, f func(t *testing.T, limiter ratelimit.Limiter)) {
	t.Helper()
	each(t, srv, f)
}

func each(t *testing.T, srv *redistest.Server, f func(t *testing.T, limiter ratelimit.Limiter), opts ...ratelimit.Option) {
	t.Helper()
	t.Run("memory", func(t *testing.T) {
		f(t, ratelimit.NewMemory(opts...))
	})
	t.Run("redis", func(t *testing.T) {
		srv.Flush(t)
		client := srv.Client()
		t.Cleanup(func() { client.Close() })
		redisOpts := make([]redislimit.Option, len(opts))
		for i, o := range opts {
			redisOpts[i] = o
		}
		f(t, redislimit.New(client, redisOpts...))
	})
}

// stoppedClock reads one instant, after the test server's clock (see
// ratelimit.WithClock).
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }
