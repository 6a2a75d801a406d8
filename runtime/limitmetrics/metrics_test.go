package limitmetrics

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

func TestNearLimitIsTenPercent(t *testing.T) {
	req := &ratelimit.Request{Name: "n", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 15}, {Period: time.Second, Threshold: 100}}}
	for _, c := range []struct {
		limit     int
		remaining int64
		near      bool
	}{{0, 2, false}, {0, 1, true}, {0, 0, true}, {1, 11, false}, {1, 10, true}} {
		assert.Equal(t, c.near, nearLimit(req, ratelimit.Decision{Allowed: true, LimitIndex: c.limit, Remaining: c.remaining}), "%+v", c)
	}
}

// TestMetricsBySource: the counters of each source add up to Snapshot's,
// and Cached and Fallback are those of their sources.
func TestMetricsBySource(t *testing.T) {
	m := &Metrics{}
	ctx := context.Background()
	req := &ratelimit.Request{Name: "n", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 10}}}
	for _, c := range []struct {
		d      ratelimit.Decision
		shadow bool
		times  int
	}{
		{ratelimit.Decision{Allowed: true, Remaining: 5}, false, 7},
		{ratelimit.Decision{Allowed: true, Remaining: 1}, false, 2},
		{ratelimit.Decision{}, false, 3},
		{ratelimit.Decision{}, true, 4},
		{ratelimit.Decision{Source: ratelimit.SourceCache}, false, 50},
		{ratelimit.Decision{Source: ratelimit.SourceCache}, true, 6},
		{ratelimit.Decision{Allowed: true, Remaining: 0, Source: ratelimit.SourceFallback}, false, 5},
		{ratelimit.Decision{Source: ratelimit.SourceFallback}, false, 8},
		{ratelimit.Decision{Source: ratelimit.SourceFallback}, true, 9},
		{ratelimit.Decision{Allowed: true, Remaining: 9, Source: ratelimit.Source(200)}, false, 1}, // counted as the backend's
	} {
		for range c.times {
			if c.shadow {
				m.ShadowLimited(ctx, req, c.d)
			} else {
				m.Decided(ctx, req, c.d)
			}
		}
	}
	m.Failed(ctx, req, ratelimit.ErrBackend)
	assert.Equal(t, Counters{Allowed: 15, Limited: 61, ShadowLimited: 19, BackendErrors: 1, NearLimit: 7, Cached: 56, Fallback: 22}, m.Snapshot()["n"])
	assert.Equal(t, Counters{Allowed: 10, Limited: 3, ShadowLimited: 4, NearLimit: 2}, m.SnapshotSource(ratelimit.SourceBackend)["n"])
	assert.Equal(t, Counters{Limited: 50, ShadowLimited: 6, Cached: 56}, m.SnapshotSource(ratelimit.SourceCache)["n"])
	assert.Equal(t, Counters{Allowed: 5, Limited: 8, ShadowLimited: 9, NearLimit: 5, Fallback: 22}, m.SnapshotSource(ratelimit.SourceFallback)["n"])
	assert.Empty(t, m.SnapshotSource(ratelimit.Source(200)))
}

// TestMetricsBreakers: Metrics keeps each breaker's state and openings.
func TestMetricsBreakers(t *testing.T) {
	m := &Metrics{}
	h := ratelimit.NewConfig(ratelimit.WithHook(m)).Hook // as a limiter holds it
	assert.Empty(t, m.Breakers())
	b := h.(ratelimit.BreakerHook)
	b.BreakerOpened("10.0.0.1:6379", ratelimit.ErrBackend)
	b.BreakerOpened("10.0.0.2:6379", ratelimit.ErrBackend)
	b.BreakerClosed("10.0.0.1:6379", time.Second)
	b.BreakerOpened("10.0.0.1:6379", ratelimit.ErrBackend)
	b.BreakerClosed("10.0.0.1:6379", time.Second)
	assert.Equal(t, map[string]BreakerState{
		"10.0.0.1:6379": {Open: false, Opened: 2},
		"10.0.0.2:6379": {Open: true, Opened: 1},
	}, m.Breakers())
}
