package guard_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/opaque"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestGuardsSeeWhatABackendOffersThroughAWrapper: a wrapper without
// Unwrap between a backend and its guards hides nothing the backend
// offers them (it reports the backend's abilities, as every wrapper
// does): the breaker probes the backend, and the fallback counts the
// processes of its fleet and carries its admissions back before the
// breaker closes.
func TestGuardsSeeWhatABackendOffersThroughAWrapper(t *testing.T) {
	ctx := context.Background()
	ms := &members{m: map[string]time.Time{}}
	backend := &fleetFlaky{flaky: &flaky{MemoryLimiter: ratelimit.NewMemory()}, heart: heart{"through-a-wrapper", ms}, back: map[string]time.Time{}}
	l := guard.Wrap(opaque.Limiter{Next: backend}, guard.WithBreaker(2, 5*time.Millisecond, 5*time.Millisecond))
	t.Cleanup(func() { guard.Close(l) })
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok, "the breaker guards a backend that offers a probe")
	fallback, ok := guard.Of[*guard.Fallback](l)
	require.True(t, ok)
	assert.True(t, fallback.Carries(), "the fallback carries back to a backend that offers it")
	require.NotNil(t, fallback.Fleet(), "the fallback counts the processes of a backend that beats")
	require.Eventually(t, func() bool { return fallback.Fleet().Beats() > 0 }, time.Minute, time.Millisecond, "the heartbeat beats")

	const limit, during = 10, 4
	rule := &ratelimit.Rule{Name: "opaque", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}
	admitWhileDown(t, l, rule, &backend.down, breaker, during)
	backend.down.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "the probe closes the breaker")
	charged, dropped := fallback.Carried()
	assert.EqualValues(t, during, charged, "carried back before the breaker closed")
	assert.Zero(t, dropped)
	d, err := backend.MemoryLimiter.Peek(ctx, ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.EqualValues(t, limit-during, d.Remaining, "the backend holds the fallback's admissions")
}
