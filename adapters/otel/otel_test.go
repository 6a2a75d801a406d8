package ratelimitotel_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	ratelimitotel "github.com/ratelimitgen/ratelimitgen/adapters/otel"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// secret is the key of every call: it must be recorded nowhere.
const secret = "ada-0f9c2e"

// fixedClock never moves, so the RetryAfter of a denial is known.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time { return c.now }

// sdk is a real OpenTelemetry SDK whose output a test reads.
type sdk struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tracer *sdktrace.TracerProvider
	tel    *ratelimitotel.Telemetry
}

func newSDK(t *testing.T, opts ...ratelimitotel.Option) *sdk {
	t.Helper()
	s := &sdk{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	s.tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	tel, err := ratelimitotel.New(append([]ratelimitotel.Option{
		ratelimitotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))),
	}, opts...)...)
	require.NoError(t, err)
	s.tel = tel
	return s
}

// inSpan runs f in a new span and returns the span's events once it ended.
func (s *sdk) inSpan(f func(ctx context.Context)) []sdktrace.Event {
	ctx, span := s.tracer.Tracer("test").Start(context.Background(), "call")
	f(ctx)
	span.End()
	ended := s.spans.Ended()
	return ended[len(ended)-1].Events()
}

// metrics collects what the reader holds, by instrument name.
func (s *sdk) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, ratelimitotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func point(v int64, kv ...attribute.KeyValue) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(kv...), Value: v}
}

func counter(points ...metricdata.DataPoint[int64]) metricdata.Sum[int64] {
	return metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: points}
}

var (
	name     = ratelimitotel.AttrName.String
	decision = ratelimitotel.AttrDecision.String
	source   = ratelimitotel.AttrSource.String
	call     = ratelimitotel.AttrCall.String
)

// TestTelemetryCountsAndTraces: decisions are counted per name, decision
// and source, backend failures per name, each call's latency is one
// observation, and denials, would-be denials and failures are events on
// the caller's span; the key is in none of them.
func TestTelemetryCountsAndTraces(t *testing.T) {
	s := newSDK(t)
	limiter := s.tel.Instrument(ratelimit.NewMemory(
		ratelimit.WithHook(s.tel), ratelimit.WithClock(fixedClock{time.Unix(1_800_000_000, 0)})))
	search := &ratelimit.Rule{Name: "search", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2}}}
	beta := &ratelimit.Rule{Name: "beta", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, Shadow: true}
	events := s.inSpan(func(ctx context.Context) {
		for i := range 3 {
			err := search.Check(ctx, limiter, 1, secret)
			assert.Equal(t, i == 2, err != nil, "call %d: %v", i, err)
		}
		for range 2 {
			require.NoError(t, beta.Check(ctx, limiter, 1, secret))
		}
	})
	require.Len(t, events, 2)
	assert.Equal(t, ratelimitotel.EventLimited, events[0].Name)
	assert.ElementsMatch(t, []attribute.KeyValue{
		name("search"),
		ratelimitotel.AttrRetryAfter.Float64(3600),
		source("backend"),
		ratelimitotel.AttrLimit.String("2/1h0m0s (sliding_log)"),
	}, events[0].Attributes)
	assert.Equal(t, ratelimitotel.EventShadowLimited, events[1].Name)

	dead, err := redistest.Start()
	require.NoError(t, err)
	dead.Stop()
	client := redis.NewClient(&redis.Options{Addr: dead.Addr, MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	down := s.tel.Instrument(redislimit.New(client, ratelimit.WithHook(s.tel)))
	pay := &ratelimit.Rule{Name: "pay", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5}}, OnError: ratelimit.FailClosed}
	events = s.inSpan(func(ctx context.Context) {
		require.ErrorIs(t, pay.Check(ctx, down, 1, secret), ratelimit.ErrBackend)
	})
	require.Len(t, events, 1)
	assert.Equal(t, ratelimitotel.EventBackendError, events[0].Name)
	assert.Contains(t, events[0].Attributes, name("pay"))
	steady := &ratelimit.Rule{Name: "steady", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, OnError: ratelimit.FailLocal}
	events = s.inSpan(func(ctx context.Context) {
		require.NoError(t, steady.Check(ctx, down, 1, secret))
		require.ErrorIs(t, steady.Check(ctx, down, 1, secret), ratelimit.ErrLimited, "the fallback keeps the limit")
	})
	require.Len(t, events, 3, "two backend errors, one denial")
	assert.Equal(t, ratelimitotel.EventLimited, events[2].Name)
	assert.Contains(t, events[2].Attributes, source("fallback"))

	got := s.metrics(t)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "ratelimit.decisions",
		Description: "Rate limit decisions, by limit name, decision and source.",
		Unit:        "{decision}",
		Data: counter(
			point(2, name("search"), decision("allowed"), source("backend")),
			point(1, name("search"), decision("limited"), source("backend")),
			point(1, name("beta"), decision("allowed"), source("backend")),
			point(1, name("beta"), decision("shadow_limited"), source("backend")),
			point(1, name("steady"), decision("allowed"), source("fallback")),
			point(1, name("steady"), decision("limited"), source("fallback")),
		),
	}, got["ratelimit.decisions"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "ratelimit.backend_errors",
		Description: "Calls the rate limiter's backend could not decide.",
		Unit:        "{call}",
		Data:        counter(point(1, name("pay")), point(2, name("steady"))),
	}, got["ratelimit.backend_errors"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "ratelimit.near_limit",
		Description: "Admissions that left at most 10% of the limit's threshold.",
		Unit:        "{decision}",
		Data:        counter(point(1, name("search")), point(1, name("beta")), point(1, name("steady"))),
	}, got["ratelimit.near_limit"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	assert.NotContains(t, got, "ratelimit.breaker.open", "no breaker opened")

	duration := got["ratelimit.decision.duration"]
	assert.Equal(t, "s", duration.Unit)
	hist, ok := duration.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%T", duration.Data)
	counts := map[attribute.Distinct]uint64{}
	for _, p := range hist.DataPoints {
		assert.Equal(t, ratelimitotel.DefaultBuckets, p.Bounds)
		assert.GreaterOrEqual(t, p.Sum, 0.0)
		var inBuckets uint64
		for _, c := range p.BucketCounts {
			inBuckets += c
		}
		assert.Equal(t, p.Count, inBuckets)
		counts[p.Attributes.Equivalent()] = p.Count
	}
	set := func(kv ...attribute.KeyValue) attribute.Distinct {
		s := attribute.NewSet(kv...)
		return s.Equivalent()
	}
	assert.Equal(t, map[attribute.Distinct]uint64{
		set(name("search"), call("allow"), source("backend")): 3,
		set(name("beta"), call("allow"), source("backend")):   2,
		set(name("pay"), call("allow"), source("error")):      1,
		set(name("steady"), call("allow"), source("error")):   2,
		// The fallback's decisions of those two calls, measured too.
		set(name("steady"), call("fallback"), source("fallback")): 2,
	}, counts)

	for _, span := range s.spans.Ended() {
		for _, e := range span.Events() {
			for _, kv := range e.Attributes {
				assert.NotContains(t, kv.Value.Emit(), secret, "event %s", e.Name)
			}
		}
	}
	for _, m := range got {
		assert.NotContains(t, strings.ToLower(m.Name+m.Description), secret)
	}
}

// TestTelemetryRedis: decisions of a real Redis are counted and measured
// as the backend's, with the bucket boundaries asked for.
func TestTelemetryRedis(t *testing.T) {
	srv, err := redistest.Start()
	require.NoError(t, err)
	defer srv.Stop()
	client := srv.Client()
	defer client.Close()
	s := newSDK(t, ratelimitotel.WithBuckets(0.001, 1))
	limiter := s.tel.Instrument(redislimit.New(client, ratelimit.WithHook(s.tel)))
	rule := &ratelimit.Rule{Name: "get", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
	events := s.inSpan(func(ctx context.Context) {
		require.NoError(t, rule.Check(ctx, limiter, 1, secret))
		require.ErrorIs(t, rule.Check(ctx, limiter, 1, secret), ratelimit.ErrLimited)
	})
	require.Len(t, events, 1)
	assert.Equal(t, ratelimitotel.EventLimited, events[0].Name)

	got := s.metrics(t)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "ratelimit.decisions",
		Description: "Rate limit decisions, by limit name, decision and source.",
		Unit:        "{decision}",
		Data: counter(
			point(1, name("get"), decision("allowed"), source("backend")),
			point(1, name("get"), decision("limited"), source("backend")),
		),
	}, got["ratelimit.decisions"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	hist := got["ratelimit.decision.duration"].Data.(metricdata.Histogram[float64])
	require.Len(t, hist.DataPoints, 1)
	assert.Equal(t, uint64(2), hist.DataPoints[0].Count)
	assert.Equal(t, []float64{0.001, 1}, hist.DataPoints[0].Bounds)
	assert.Positive(t, hist.DataPoints[0].Sum, "a Redis round trip takes time")
}

// TestTelemetryBreakers: a Redis that goes away opens its breaker, which
// ratelimit.breaker.open shows until Redis is back; ratelimit.breaker.opens
// keeps the opening.
func TestTelemetryBreakers(t *testing.T) {
	s := newSDK(t)
	client := unreachable(t)
	addr := client.Options().Addr
	limiter := s.tel.Instrument(redislimit.New(client, ratelimit.WithHook(s.tel), redislimit.WithBreaker(1, 20*time.Millisecond, 20*time.Millisecond)))
	rule := &ratelimit.Rule{Name: "search", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}}}
	ctx := context.Background()
	require.NoError(t, rule.Check(ctx, limiter, 1, secret), "fails open")
	node := ratelimitotel.AttrNode.String(addr)
	breakers := func(open int64) {
		t.Helper()
		got := s.metrics(t)
		metricdatatest.AssertEqual(t, metricdata.Metrics{
			Name:        "ratelimit.breaker.open",
			Description: "Circuit breakers of a Redis node that are open: 1 while open, 0 when closed.",
			Unit:        "{breaker}",
			Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: false,
				DataPoints: []metricdata.DataPoint[int64]{point(open, node)}},
		}, got["ratelimit.breaker.open"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
		metricdatatest.AssertEqual(t, metricdata.Metrics{
			Name:        "ratelimit.breaker.opens",
			Description: "Times the circuit breaker of a Redis node opened.",
			Unit:        "{opening}",
			Data:        counter(point(1, node)),
		}, got["ratelimit.breaker.opens"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	}
	breakers(1)

	srv, err := redistest.StartOn(addr)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	require.Eventually(t, func() bool {
		var rm metricdata.ResourceMetrics
		require.NoError(t, s.reader.Collect(ctx, &rm))
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "ratelimit.breaker.open" {
					return m.Data.(metricdata.Sum[int64]).DataPoints[0].Value == 0
				}
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)
	breakers(0)
	require.NoError(t, rule.Check(ctx, limiter, 1, secret))
}

// TestInstrumentKeepsTheWrappedSettings: wrapping a limiter keeps its
// overrides and its error policy.
func TestInstrumentKeepsTheWrappedSettings(t *testing.T) {
	ctx := context.Background()
	tel := newSDK(t).tel
	overrides := overridesFunc(func(_ context.Context, name string) ([]ratelimit.Limit, bool) {
		return []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, name == "get"
	})
	limiter := tel.Instrument(ratelimit.NewMemory(ratelimit.WithOverrides(overrides)))
	rule := &ratelimit.Rule{Name: "get", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 5}}}
	require.NoError(t, rule.Check(ctx, limiter, 1, ""))
	assert.ErrorIs(t, rule.Check(ctx, limiter, 1, ""), ratelimit.ErrLimited, "the override of 1 per hour applies")

	closed := tel.Instrument(redislimit.New(unreachable(t), ratelimit.WithErrorPolicy(ratelimit.FailClosed)))
	assert.ErrorIs(t, rule.Check(ctx, closed, 1, ""), ratelimit.ErrBackend, "the limiter's fail-closed policy applies")
	inner := ratelimit.NewMemory()
	assert.Same(t, inner, tel.Instrument(inner).Unwrap())
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

// fieldProblems is an OverridesReporter with fixed answers.
type fieldProblems struct {
	rejected uint64
	problems []*ratelimit.FieldError
}

func (f fieldProblems) Rejected() uint64                  { return f.rejected }
func (f fieldProblems) Problems() []*ratelimit.FieldError { return f.problems }

// TestTelemetryObservesOverrides: the rejected fields of overrides and
// their current problems are read at each collection.
func TestTelemetryObservesOverrides(t *testing.T) {
	s := newSDK(t)
	src := &fieldProblems{rejected: 2, problems: []*ratelimit.FieldError{{Field: "r|key=k", Err: ratelimit.ErrInvalidLimit}}}
	require.NoError(t, s.tel.ObserveOverrides(src))
	m := s.metrics(t)
	metricdatatest.AssertAggregationsEqual(t, counter(point(2)), m["ratelimit.override.rejections"].Data, metricdatatest.IgnoreTimestamp())
	metricdatatest.AssertAggregationsEqual(t, metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{point(1)}},
		m["ratelimit.override.problems"].Data, metricdatatest.IgnoreTimestamp())
	src.problems = nil
	m = s.metrics(t)
	metricdatatest.AssertAggregationsEqual(t, metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{point(0)}},
		m["ratelimit.override.problems"].Data, metricdatatest.IgnoreTimestamp())
}

// overridesFunc adapts a function to ratelimit.Overrides.
type overridesFunc func(ctx context.Context, name string) ([]ratelimit.Limit, bool)

// Lookup calls f.
func (f overridesFunc) Lookup(ctx context.Context, name string) ([]ratelimit.Limit, bool) {
	return f(ctx, name)
}
