package limitertest

import (
	"testing"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestMemory runs the suite on the in-process limiter, against its twin.
func TestMemory(t *testing.T) {
	t.Parallel() // the suite waits on real time more than it computes
	Run(t, Backend{
		New:   func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter { return ratelimit.NewMemory(opts...) },
		Clock: true,
	})
}

// TestMemoryWithoutClock runs the suite's invariants on the in-process
// limiter on the process's clock.
func TestMemoryWithoutClock(t *testing.T) {
	t.Parallel() // the suite waits on real time more than it computes
	Run(t, Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter { return ratelimit.NewMemory(opts...) },
	})
}
