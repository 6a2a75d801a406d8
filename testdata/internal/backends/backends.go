// Package backends runs the behaviour tests of the generated code in the
// testdata packages on every limiter backend: the in-process memory
// limiter and a real Redis server.
package backends

import (
	"testing"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Each runs f as a subtest once per backend, each time with a limiter that
// has seen no calls.
func Each(t *testing.T, srv *redistest.Server, f func(t *testing.T, limiter ratelimit.Limiter)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) {
		f(t, ratelimit.NewMemory())
	})
	t.Run("redis", func(t *testing.T) {
		srv.Flush(t)
		client := srv.Client()
		t.Cleanup(func() { client.Close() })
		f(t, ratelimit.NewRedis(client))
	})
}
