package redislimit

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestRecoveringProcessesWaitForEachOther: after an outage, a process
// whose probe finds Redis back keeps its breaker open, its fallback
// deciding, until every process its heartbeat counted has found Redis
// back too, so that none decides by Redis while another still spends its
// share of the same windows. Then both decide by Redis.
func TestRecoveringProcessesWaitForEachOther(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	var blocked atomic.Bool
	a := New(failFastClient(t, s.Addr), WithBreaker(2, 20*time.Millisecond, 20*time.Millisecond))
	b := New(blockableClient(t, s.Addr, &blocked), WithBreaker(2, 20*time.Millisecond, 20*time.Millisecond))
	t.Cleanup(func() { a.Close(); b.Close() })
	for _, l := range []*Limiter{a, b} {
		require.Eventually(t, func() bool { return l.fallback.Processes() == 2 }, 30*time.Second, 10*time.Millisecond, "the heartbeat counts both")
	}
	rule := &ratelimit.Rule{Name: "rejoin", Limits: perPeriod(100, time.Minute)}
	ctx := context.Background()

	s.Stop()
	for _, l := range []*Limiter{a, b} {
		require.Eventually(t, func() bool { _ = rule.Check(ctx, l, 1, "k"); return l.CircuitOpen() }, 30*time.Second, time.Millisecond)
	}
	blocked.Store(true) // b cannot reach Redis when it is back
	s2, err := redistest.StartOn(s.Addr)
	require.NoError(t, err)
	t.Cleanup(s2.Stop)

	require.Eventually(t, func() bool { charged, _ := a.fallback.Carried(); return charged > 0 }, 30*time.Second, time.Millisecond,
		"a's probe finds Redis back and carries back what its fallback admitted")
	for range 20 {
		require.True(t, a.CircuitOpen(), "a waits for b, still in its outage")
		time.Sleep(10 * time.Millisecond)
	}
	blocked.Store(false)
	for _, l := range []*Limiter{a, b} {
		require.Eventually(t, func() bool { return !l.CircuitOpen() }, 30*time.Second, time.Millisecond, "both decide by Redis again")
	}
}

// blockableClient is failFastClient whose dials fail while blocked is set,
// as a process cut off from Redis.
func blockableClient(t *testing.T, addr string, blocked *atomic.Bool) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if blocked.Load() {
				return nil, errors.New("dial: cut off")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { c.Close() })
	return c
}
