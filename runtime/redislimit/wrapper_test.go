package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/opaque"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestGuardsOfTheRedisBackendBehindAWrapper: a user's wrapper without
// Unwrap between the Redis backend and guard.Wrap hides nothing the
// backend offers the guards: its fallback counts the processes sharing
// the server, its breaker opens when the server is killed and probes it
// until one is back, and the fallback's admissions of the outage are
// charged to Redis before the breaker closes.
func TestGuardsOfTheRedisBackendBehindAWrapper(t *testing.T) {
	ctx := context.Background()
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	b := newBackend(failFastClient(t, s.Addr), nil)
	l := guard.Wrap(opaque.Limiter{Next: b}, guard.WithBreaker(2, 20*time.Millisecond, 200*time.Millisecond), guard.WithDenyCache(0))
	t.Cleanup(func() { guard.Close(l) })
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok, "the breaker guards the backend: it offers a probe")
	fallback, ok := guard.Of[*guard.Fallback](l)
	require.True(t, ok)
	assert.True(t, fallback.Carries(), "the fallback carries back to the backend")
	require.NotNil(t, fallback.Fleet(), "the fallback counts the processes of the backend's heartbeat")
	require.Eventually(t, func() bool { return fallback.Fleet().Beats() > 0 }, time.Minute, 10*time.Millisecond, "the heartbeat beats in Redis")
	assert.Equal(t, 1, fallback.Processes())

	const limit, during = 10, 4
	rule := &ratelimit.Rule{Name: "opaque", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}
	addr := s.Addr
	s.Stop()
	for range during {
		a, err := rule.Admit(ctx, l, 1, "k")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
	}
	require.True(t, breaker.CircuitOpen(), "the breaker opens: its probe fails too")
	s, err = redistest.StartOn(addr)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, 10*time.Millisecond, "the probe closes the breaker")
	charged, dropped := fallback.Carried()
	assert.EqualValues(t, during, charged, "carried back before the breaker closed")
	assert.Zero(t, dropped)
	d, err := b.Peek(ctx, ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.EqualValues(t, limit-during, d.Remaining, "Redis holds the fallback's admissions")
}

// TestLimiterReportsWhatItsBackendOffersTheGuards: a Limiter reports, as
// every wrapper does, what its Redis backend offers the guards (a probe,
// the carry-back, the heartbeat), so that guards put around it, or around
// a wrapper of it, find them.
func TestLimiterReportsWhatItsBackendOffersTheGuards(t *testing.T) {
	l := newTestRedis(t)
	offer := l.Abilities().ForGuards
	require.Equal(t, l.redisBackend.Abilities().ForGuards, offer)
	probed, ok := offer.(guard.Probed)
	require.True(t, ok, "a probe")
	assert.False(t, probed.PerNode(), "a client of one server is one node")
	_, ok = offer.(guard.Carrier)
	assert.True(t, ok, "the carry-back")
	_, ok = offer.(guard.Heartbeater)
	assert.True(t, ok, "the heartbeat")
}
