package ratelimitprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimitprom "github.com/ratelimitgen/ratelimitgen/adapters/prometheus"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// gather returns the families c exports, by name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// labelValues returns the values of m's labels named names, joined by '/'.
func labelValues(m *dto.Metric, names ...string) string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	var vals []string
	for _, n := range names {
		vals = append(vals, labels[n])
	}
	return strings.Join(vals, "/")
}

// histograms gathers the duration histogram of c into a map from
// "name/source" to its series, for the calls of Allow.
func histograms(t *testing.T, c prometheus.Collector) map[string]*dto.Histogram {
	t.Helper()
	f := gather(t, c)["ratelimit_decision_duration_seconds"]
	require.NotNil(t, f)
	assert.Equal(t, dto.MetricType_HISTOGRAM, f.GetType())
	out := map[string]*dto.Histogram{}
	for _, m := range f.GetMetric() {
		if labelValues(m, "call") == "allow" {
			out[labelValues(m, "name", "source")] = m.GetHistogram()
		}
	}
	return out
}

// counters gathers the counter family name of c into a map from its
// labels' values, joined by '/', to its value.
func counters(t *testing.T, c prometheus.Collector, name string, labels ...string) map[string]float64 {
	t.Helper()
	f := gather(t, c)[name]
	require.NotNil(t, f, name)
	assert.Equal(t, dto.MetricType_COUNTER, f.GetType())
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		out[labelValues(m, labels...)] = m.GetCounter().GetValue()
	}
	return out
}

// TestInstrumentMeasuresEveryCall: each call the wrapped limiter answers is
// one observation, under its limit name and the decision's source, or
// "error" when it failed; the buckets hold what the sum says.
func TestInstrumentMeasuresEveryCall(t *testing.T) {
	ctx := context.Background()
	memory := ratelimitprom.Instrument(ratelimit.NewMemory())
	search := &ratelimit.Rule{Name: "search", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3}}}
	for range 5 {
		_ = search.Check(ctx, memory, 1, "")
	}
	down := ratelimitprom.Instrument(redislimit.New(unreachable(t)), 0.001, 10)
	pay := &ratelimit.Rule{Name: "pay", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5}}}
	require.NoError(t, pay.Check(ctx, down, 1, ""), "fail open")

	h := histograms(t, memory)
	require.Len(t, h, 1)
	assert.Equal(t, uint64(5), h["search/backend"].GetSampleCount())
	assert.Len(t, h["search/backend"].GetBucket(), len(ratelimitprom.DefaultBuckets))
	assertConsistent(t, h["search/backend"])

	h = histograms(t, down)
	require.Len(t, h, 1)
	assert.Equal(t, uint64(1), h["pay/error"].GetSampleCount())
	assert.Equal(t, []float64{0.001, 10}, upperBounds(h["pay/error"]))
	assertConsistent(t, h["pay/error"])

	problems, err := testutil.CollectAndLint(memory)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// TestInstrumentRedis: calls decided by a real Redis are measured as the
// backend's.
func TestInstrumentRedis(t *testing.T) {
	srv, err := redistest.Start()
	require.NoError(t, err)
	defer srv.Stop()
	client := srv.Client()
	defer client.Close()
	limiter := ratelimitprom.Instrument(redislimit.New(client))
	rule := &ratelimit.Rule{Name: "get", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2}}}
	for i := range 3 {
		err := rule.Check(context.Background(), limiter, 1, "u")
		assert.Equal(t, i == 2, err != nil, "call %d: %v", i, err)
	}
	h := histograms(t, limiter)
	assert.Equal(t, uint64(3), h["get/backend"].GetSampleCount())
	assert.Positive(t, h["get/backend"].GetSampleSum(), "a Redis round trip takes time")
	assertConsistent(t, h["get/backend"])
}

// TestInstrumentKeepsTheWrappedSettings: wrapping a limiter keeps its
// overrides and its error policy.
func TestInstrumentKeepsTheWrappedSettings(t *testing.T) {
	ctx := context.Background()
	overrides := overridesFunc(func(_ context.Context, name string) ([]ratelimit.Limit, bool) {
		return []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, name == "get"
	})
	limiter := ratelimitprom.Instrument(ratelimit.NewMemory(ratelimit.WithOverrides(overrides)))
	rule := &ratelimit.Rule{Name: "get", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 5}}}
	require.NoError(t, rule.Check(ctx, limiter, 1, ""))
	assert.ErrorIs(t, rule.Check(ctx, limiter, 1, ""), ratelimit.ErrLimited, "the override of 1 per hour applies")

	closed := ratelimitprom.Instrument(redislimit.New(unreachable(t), ratelimit.WithErrorPolicy(ratelimit.FailClosed)))
	assert.ErrorIs(t, rule.Check(ctx, closed, 1, ""), ratelimit.ErrBackend, "the limiter's fail-closed policy applies")
	inner := ratelimit.NewMemory()
	assert.Same(t, inner, ratelimitprom.Instrument(inner).Unwrap())
}

func upperBounds(h *dto.Histogram) []float64 {
	var out []float64
	for _, b := range h.GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}

// assertConsistent checks that the buckets are cumulative, hold no more
// than the count, and that the sum fits the observations: non-negative,
// and at least the lower bound of the bucket each observation fell in.
func assertConsistent(t *testing.T, h *dto.Histogram) {
	t.Helper()
	var prev uint64
	lower := 0.0
	least := 0.0
	for _, b := range h.GetBucket() {
		c := b.GetCumulativeCount()
		assert.GreaterOrEqual(t, c, prev, "cumulative")
		least += float64(c-prev) * lower
		prev, lower = c, b.GetUpperBound()
		assert.LessOrEqual(t, c, h.GetSampleCount())
	}
	least += float64(h.GetSampleCount()-prev) * lower
	assert.GreaterOrEqual(t, h.GetSampleSum(), least)
}

// overridesFunc adapts a function to ratelimit.Overrides.
type overridesFunc func(ctx context.Context, name string) ([]ratelimit.Limit, bool)

// Lookup calls f.
func (f overridesFunc) Lookup(ctx context.Context, name string) ([]ratelimit.Limit, bool) {
	return f(ctx, name)
}

// TestInstrumentMeasuresEveryPath: plain checks, settle= (Reserve, then
// Adjust), concurrency= (slots), Peek are timed, by call, and counted in
// calls and in units per rule and line, as a Prometheus registry exports
// them, with no key among the labels.
func TestInstrumentMeasuresEveryPath(t *testing.T) {
	ctx := context.Background()
	l := ratelimitprom.Instrument(ratelimit.NewMemory())
	plain := &ratelimit.Rule{Name: "plain", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, {Period: time.Hour, Threshold: 7}}}
	require.NoError(t, plain.Check(ctx, l, 3, "secret-key"))
	require.NoError(t, plain.Check(ctx, l, 3, "secret-key"))
	require.ErrorIs(t, plain.Check(ctx, l, 3, "secret-key"), ratelimit.ErrLimited)
	_, err := plain.Peek(ctx, l, "secret-key")
	require.NoError(t, err)
	settle := &ratelimit.Rule{Name: "tokens", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}}
	res, err := settle.Reserve(ctx, l, 500, "secret-key")
	require.NoError(t, err)
	require.NoError(t, res.Settle(ctx, 120))
	conc := &ratelimit.Rule{Name: "exports", Limits: []ratelimit.Limit{{Algorithm: "concurrency", Threshold: 1, Period: time.Minute}}}
	held, err := conc.Reserve(ctx, l, 1, "secret-key")
	require.NoError(t, err)
	require.NoError(t, held.Release(ctx))

	f := gather(t, l)["ratelimit_decision_duration_seconds"]
	require.NotNil(t, f)
	timed := map[string]uint64{}
	for _, m := range f.GetMetric() {
		timed[labelValues(m, "name", "call", "source")] = m.GetHistogram().GetSampleCount()
		assertConsistent(t, m.GetHistogram())
	}
	assert.Equal(t, map[string]uint64{
		"plain/allow/backend": 3, "plain/peek/backend": 1,
		"tokens/reserve/backend": 1, "tokens/adjust/backend": 1,
		"exports/reserve_slot/backend": 1, "exports/release_slot/backend": 1,
	}, timed)
	assert.Equal(t, map[string]float64{
		"plain/allow/allowed": 2, "plain/allow/limited": 1, "plain/peek/allowed": 1,
		"tokens/reserve/allowed": 1, "tokens/adjust/refunded": 1,
		"exports/reserve_slot/allowed": 1, "exports/release_slot/released": 1,
	}, counters(t, l, "ratelimit_calls_total", "name", "call", "outcome"))
	assert.Equal(t, map[string]float64{
		"plain/0/allowed": 6, "plain/1/allowed": 6, "plain/1/limited": 3,
		"tokens/0/allowed": 500, "tokens/0/refunded": 380,
		"exports/0/allowed": 1, "exports/0/released": 1,
	}, counters(t, l, "ratelimit_units_total", "name", "line", "outcome"))

	for _, f := range gather(t, l) {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				assert.NotContains(t, lp.GetValue(), "secret-key", "no key label")
			}
		}
	}
	problems, err := testutil.CollectAndLint(l)
	require.NoError(t, err)
	assert.Empty(t, problems)
}
