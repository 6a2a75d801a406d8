package ratelimitotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestTelemetryCountsTheCallsInFlight: the up-down counter follows the
// slots of a concurrency limit taken and given back, through an
// instrumented limiter too.
func TestTelemetryCountsTheCallsInFlight(t *testing.T) {
	s := newSDK(t)
	limiter := s.tel.Instrument(ratelimit.NewMemory(ratelimit.WithHook(s.tel)))
	export := &ratelimit.Rule{Name: "export", Limits: []ratelimit.Limit{{Algorithm: "concurrency", Threshold: 5}}}
	ctx := context.Background()
	a, err := export.Reserve(ctx, limiter, 0, secret)
	require.NoError(t, err)
	b, err := export.Reserve(ctx, limiter, 0, secret)
	require.NoError(t, err)
	require.NoError(t, a.Release(ctx))
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name:        "ratelimit.in_flight",
		Description: "Calls holding a slot of a concurrency limit, by limit name.",
		Unit:        "{call}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: false,
			DataPoints: []metricdata.DataPoint[int64]{point(1, name("export"))}},
	}, s.metrics(t)["ratelimit.in_flight"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	require.NoError(t, b.Release(ctx))
}
