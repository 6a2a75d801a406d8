package ratelimitprom_test

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimitprom "github.com/ratelimitgen/ratelimitgen/adapters/prometheus"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// TestCollectorExportsEveryCounter: each counter of the Metrics hook
// reaches Prometheus under its limit's name, with the metric names the
// example always had.
func TestCollectorExportsEveryCounter(t *testing.T) {
	ctx := context.Background()
	metrics := &limitmetrics.Metrics{}
	limiter := ratelimit.NewMemory(ratelimit.WithHook(metrics))
	search := &ratelimit.Rule{Name: "search", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}}}
	for i := range 11 {
		err := search.Check(ctx, limiter, 1, "")
		assert.Equal(t, i == 10, err != nil, "call %d: %v", i, err)
	}
	beta := &ratelimit.Rule{Name: "beta", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, Shadow: true}
	for range 3 {
		require.NoError(t, beta.Check(ctx, limiter, 1, ""))
	}
	down := redislimit.New(unreachable(t), ratelimit.WithHook(metrics))
	pay := &ratelimit.Rule{Name: "pay", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5}}, OnError: ratelimit.FailClosed}
	require.ErrorIs(t, pay.Check(ctx, down, 1, ""), ratelimit.ErrBackend)
	steady := &ratelimit.Rule{Name: "steady", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, OnError: ratelimit.FailLocal}
	require.NoError(t, steady.Check(ctx, down, 1, ""))
	require.ErrorIs(t, steady.Check(ctx, down, 1, ""), ratelimit.ErrLimited, "the fallback keeps the limit")
	up := redislimit.New(redisServer(t), ratelimit.WithHook(metrics))
	abuse := &ratelimit.Rule{Name: "abuse", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
	for i := range 3 {
		err := abuse.Check(ctx, up, 1, "")
		assert.Equal(t, i > 0, err != nil, "call %d: %v", i, err)
	}

	want := `
# HELP ratelimit_backend_errors_total Calls the rate limiter's backend could not decide.
# TYPE ratelimit_backend_errors_total counter
ratelimit_backend_errors_total{name="abuse"} 0
ratelimit_backend_errors_total{name="beta"} 0
ratelimit_backend_errors_total{name="pay"} 1
ratelimit_backend_errors_total{name="search"} 0
ratelimit_backend_errors_total{name="steady"} 2
# HELP ratelimit_cached_denials_total Denials, real or shadow, repeated from the local deny cache without asking Redis.
# TYPE ratelimit_cached_denials_total counter
ratelimit_cached_denials_total{name="abuse"} 1
ratelimit_cached_denials_total{name="beta"} 0
ratelimit_cached_denials_total{name="pay"} 0
ratelimit_cached_denials_total{name="search"} 0
ratelimit_cached_denials_total{name="steady"} 0
# HELP ratelimit_decisions_total Rate limit decisions, by limit name, decision and source (backend, cache, fallback, override or lease).
# TYPE ratelimit_decisions_total counter
ratelimit_decisions_total{decision="allowed",name="abuse",source="backend"} 1
ratelimit_decisions_total{decision="allowed",name="abuse",source="fallback"} 0
ratelimit_decisions_total{decision="allowed",name="abuse",source="lease"} 0
ratelimit_decisions_total{decision="allowed",name="beta",source="backend"} 1
ratelimit_decisions_total{decision="allowed",name="beta",source="fallback"} 0
ratelimit_decisions_total{decision="allowed",name="beta",source="lease"} 0
ratelimit_decisions_total{decision="allowed",name="pay",source="backend"} 0
ratelimit_decisions_total{decision="allowed",name="pay",source="fallback"} 0
ratelimit_decisions_total{decision="allowed",name="pay",source="lease"} 0
ratelimit_decisions_total{decision="allowed",name="search",source="backend"} 10
ratelimit_decisions_total{decision="allowed",name="search",source="fallback"} 0
ratelimit_decisions_total{decision="allowed",name="search",source="lease"} 0
ratelimit_decisions_total{decision="allowed",name="steady",source="backend"} 0
ratelimit_decisions_total{decision="allowed",name="steady",source="fallback"} 1
ratelimit_decisions_total{decision="allowed",name="steady",source="lease"} 0
ratelimit_decisions_total{decision="limited",name="abuse",source="backend"} 1
ratelimit_decisions_total{decision="limited",name="abuse",source="cache"} 1
ratelimit_decisions_total{decision="limited",name="abuse",source="fallback"} 0
ratelimit_decisions_total{decision="limited",name="abuse",source="override"} 0
ratelimit_decisions_total{decision="limited",name="beta",source="backend"} 0
ratelimit_decisions_total{decision="limited",name="beta",source="cache"} 0
ratelimit_decisions_total{decision="limited",name="beta",source="fallback"} 0
ratelimit_decisions_total{decision="limited",name="beta",source="override"} 0
ratelimit_decisions_total{decision="limited",name="pay",source="backend"} 0
ratelimit_decisions_total{decision="limited",name="pay",source="cache"} 0
ratelimit_decisions_total{decision="limited",name="pay",source="fallback"} 0
ratelimit_decisions_total{decision="limited",name="pay",source="override"} 0
ratelimit_decisions_total{decision="limited",name="search",source="backend"} 1
ratelimit_decisions_total{decision="limited",name="search",source="cache"} 0
ratelimit_decisions_total{decision="limited",name="search",source="fallback"} 0
ratelimit_decisions_total{decision="limited",name="search",source="override"} 0
ratelimit_decisions_total{decision="limited",name="steady",source="backend"} 0
ratelimit_decisions_total{decision="limited",name="steady",source="cache"} 0
ratelimit_decisions_total{decision="limited",name="steady",source="fallback"} 1
ratelimit_decisions_total{decision="limited",name="steady",source="override"} 0
ratelimit_decisions_total{decision="shadow_limited",name="abuse",source="backend"} 0
ratelimit_decisions_total{decision="shadow_limited",name="abuse",source="cache"} 0
ratelimit_decisions_total{decision="shadow_limited",name="abuse",source="fallback"} 0
ratelimit_decisions_total{decision="shadow_limited",name="abuse",source="override"} 0
ratelimit_decisions_total{decision="shadow_limited",name="beta",source="backend"} 2
ratelimit_decisions_total{decision="shadow_limited",name="beta",source="cache"} 0
ratelimit_decisions_total{decision="shadow_limited",name="beta",source="fallback"} 0
ratelimit_decisions_total{decision="shadow_limited",name="beta",source="override"} 0
ratelimit_decisions_total{decision="shadow_limited",name="pay",source="backend"} 0
ratelimit_decisions_total{decision="shadow_limited",name="pay",source="cache"} 0
ratelimit_decisions_total{decision="shadow_limited",name="pay",source="fallback"} 0
ratelimit_decisions_total{decision="shadow_limited",name="pay",source="override"} 0
ratelimit_decisions_total{decision="shadow_limited",name="search",source="backend"} 0
ratelimit_decisions_total{decision="shadow_limited",name="search",source="cache"} 0
ratelimit_decisions_total{decision="shadow_limited",name="search",source="fallback"} 0
ratelimit_decisions_total{decision="shadow_limited",name="search",source="override"} 0
ratelimit_decisions_total{decision="shadow_limited",name="steady",source="backend"} 0
ratelimit_decisions_total{decision="shadow_limited",name="steady",source="cache"} 0
ratelimit_decisions_total{decision="shadow_limited",name="steady",source="fallback"} 0
ratelimit_decisions_total{decision="shadow_limited",name="steady",source="override"} 0
# HELP ratelimit_fallback_decisions_total Decisions made in process while the backend could not decide (onerror=local).
# TYPE ratelimit_fallback_decisions_total counter
ratelimit_fallback_decisions_total{name="abuse"} 0
ratelimit_fallback_decisions_total{name="beta"} 0
ratelimit_fallback_decisions_total{name="pay"} 0
ratelimit_fallback_decisions_total{name="search"} 0
ratelimit_fallback_decisions_total{name="steady"} 2
# HELP ratelimit_in_flight Calls of this process holding a slot of the limit's concurrency limit.
# TYPE ratelimit_in_flight gauge
ratelimit_in_flight{name="abuse"} 0
ratelimit_in_flight{name="beta"} 0
ratelimit_in_flight{name="pay"} 0
ratelimit_in_flight{name="search"} 0
ratelimit_in_flight{name="steady"} 0
# HELP ratelimit_near_limit_total Admissions that left at most 10% of the limit's threshold.
# TYPE ratelimit_near_limit_total counter
ratelimit_near_limit_total{name="abuse"} 1
ratelimit_near_limit_total{name="beta"} 1
ratelimit_near_limit_total{name="pay"} 0
ratelimit_near_limit_total{name="search"} 2
ratelimit_near_limit_total{name="steady"} 1
`
	collector := ratelimitprom.NewCollector(metrics)
	require.NoError(t, testutil.CollectAndCompare(collector, strings.NewReader(want)))
	problems, err := testutil.CollectAndLint(collector)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// TestCollectorExportsEveryField: the collector sends one series per field
// of limitmetrics.Counters for each name (the decisions' three split by
// source into eleven), so a counter added to the runtime is not left
// unexported.
func TestCollectorExportsEveryField(t *testing.T) {
	metrics := &limitmetrics.Metrics{}
	rule := &ratelimit.Rule{Name: "one", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
	require.NoError(t, rule.Check(context.Background(), ratelimit.NewMemory(ratelimit.WithHook(metrics)), 1, ""))
	fields := reflect.TypeFor[limitmetrics.Counters]().NumField()
	assert.Equal(t, fields-3+11, testutil.CollectAndCount(ratelimitprom.NewCollector(metrics)))
}

// redisServer returns a client of a real Redis server of the test's own.
func redisServer(t *testing.T) *redis.Client {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	c := s.Client()
	t.Cleanup(func() { c.Close() })
	return c
}

// unreachable returns a client of a loopback port nobody listens on.
func unreachable(t *testing.T) *redis.Client {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

var _ prometheus.Collector = (*ratelimitprom.Collector)(nil)

// TestCollectorExportsBreakers: a Redis that goes away opens its breaker,
// which the gauge shows until Redis is back; the counter keeps the
// opening.
func TestCollectorExportsBreakers(t *testing.T) {
	ctx := context.Background()
	client := unreachable(t)
	addr := client.Options().Addr
	metrics := &limitmetrics.Metrics{}
	limiter := redislimit.New(client, ratelimit.WithHook(metrics), redislimit.WithBreaker(1, 20*time.Millisecond, 20*time.Millisecond))
	rule := &ratelimit.Rule{Name: "search", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}}, OnError: ratelimit.FailOpen}
	require.NoError(t, rule.Check(ctx, limiter, 1, ""), "fails open")
	collector := ratelimitprom.NewCollector(metrics)
	breakers := func(open int) string {
		return fmt.Sprintf(`
# HELP ratelimit_breaker_open Whether the circuit breaker of a Redis node is open (1) or closed (0).
# TYPE ratelimit_breaker_open gauge
ratelimit_breaker_open{node=%[1]q} %[2]d
# HELP ratelimit_breaker_opens_total Times the circuit breaker of a Redis node opened.
# TYPE ratelimit_breaker_opens_total counter
ratelimit_breaker_opens_total{node=%[1]q} 1
`, addr, open)
	}
	require.NoError(t, testutil.CollectAndCompare(collector, strings.NewReader(breakers(1)), "ratelimit_breaker_open", "ratelimit_breaker_opens_total"))

	s, err := redistest.StartOn(addr)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	require.Eventually(t, func() bool {
		return testutil.CollectAndCompare(collector, strings.NewReader(breakers(0)), "ratelimit_breaker_open", "ratelimit_breaker_opens_total") == nil
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, rule.Check(ctx, limiter, 1, ""))
	assert.Equal(t, uint64(1), metrics.Snapshot()["search"].Allowed, "Redis decides again")
	problems, err := testutil.CollectAndLint(collector)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// fieldProblems is an OverridesReporter with fixed answers.
type fieldProblems struct {
	rejected uint64
	problems []*ratelimit.FieldError
}

func (f fieldProblems) Rejected() uint64                  { return f.rejected }
func (f fieldProblems) Problems() []*ratelimit.FieldError { return f.problems }

// TestOverridesCollectorAndBlockedKeys: a source's rejected fields and
// current problems are exported, and a key an override blocks is counted
// as a denial of source override.
func TestOverridesCollectorAndBlockedKeys(t *testing.T) {
	src := fieldProblems{rejected: 3, problems: []*ratelimit.FieldError{{Field: "svc.Get|key=k", Err: ratelimit.ErrInvalidLimit}}}
	want := `# HELP ratelimit_override_problems Fields of the overrides that cannot be used now; each keeps its last good value.
# TYPE ratelimit_override_problems gauge
ratelimit_override_problems 1
# HELP ratelimit_override_rejections_total Fields of the overrides that could not be used, each counted once per value.
# TYPE ratelimit_override_rejections_total counter
ratelimit_override_rejections_total 3
`
	require.NoError(t, testutil.CollectAndCompare(ratelimitprom.NewOverridesCollector(src), strings.NewReader(want)))

	metrics := &limitmetrics.Metrics{}
	var ov ratelimit.StaticOverrides
	ov.SetKey("blocked", "mallory", ratelimit.Limit{Algorithm: ratelimit.Block})
	l := ratelimit.NewMemory(ratelimit.WithHook(metrics), ratelimit.WithOverrides(&ov))
	rule := &ratelimit.Rule{Name: "blocked", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 5}}}
	require.ErrorIs(t, rule.Check(context.Background(), l, 1, "mallory"), ratelimit.ErrLimited)
	got, err := testutil.GatherAndCount(collectorRegistry(t, ratelimitprom.NewCollector(metrics)), "ratelimit_decisions_total")
	require.NoError(t, err)
	assert.Equal(t, 11, got, "eleven decision series per name")
	assert.Equal(t, 1.0, testutil.ToFloat64(onlyOverride(t, metrics)))
}

// collectorRegistry returns a registry holding c.
func collectorRegistry(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	r := prometheus.NewRegistry()
	require.NoError(t, r.Register(c))
	return r
}

// onlyOverride returns a gauge set to the blocked denials metrics counted.
func onlyOverride(t *testing.T, metrics *limitmetrics.Metrics) prometheus.Gauge {
	t.Helper()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
	g.Set(float64(metrics.SnapshotSource(ratelimit.SourceOverride)["blocked"].Limited))
	return g
}

// TestCollectorExportsTheCallsInFlight: the gauge follows the slots of a
// concurrency limit taken and given back.
func TestCollectorExportsTheCallsInFlight(t *testing.T) {
	ctx := context.Background()
	metrics := &limitmetrics.Metrics{}
	limiter := ratelimit.NewMemory(ratelimit.WithHook(metrics))
	export := &ratelimit.Rule{Name: "export", Limits: []ratelimit.Limit{{Algorithm: "concurrency", Threshold: 5}}}
	a, err := export.Reserve(ctx, limiter, 0, "")
	require.NoError(t, err)
	b, err := export.Reserve(ctx, limiter, 0, "")
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	collector := ratelimitprom.NewCollector(metrics)
	require.NoError(t, testutil.CollectAndCompare(collector, strings.NewReader(`
# HELP ratelimit_in_flight Calls of this process holding a slot of the limit's concurrency limit.
# TYPE ratelimit_in_flight gauge
ratelimit_in_flight{name="export"} 1
`), "ratelimit_in_flight"))
	require.NoError(t, b.Release(ctx))
}
