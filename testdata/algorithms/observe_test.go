package algorithms

import (
	"testing"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

const rolloutName = "github.com/ratelimitgen/ratelimitgen/testdata/algorithms.API.Rollout"

// observe returns a limiter like limiter whose decisions also go to hook:
// a fresh limiter of the same kind made with ratelimit.WithHook.
func observe(t *testing.T, limiter ratelimit.Limiter, hook ratelimit.Hook) ratelimit.Limiter {
	t.Helper()
	switch limiter.(type) {
	case *ratelimit.MemoryLimiter:
		return ratelimit.NewMemory(ratelimit.WithHook(hook))
	case *redislimit.Limiter:
		c := srv.Client()
		t.Cleanup(func() { c.Close() })
		return redislimit.New(c, ratelimit.WithHook(hook))
	}
	t.Fatalf("unknown limiter %T", limiter)
	return nil
}
