package ratelimitotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	ratelimitotel "github.com/ratelimitgen/ratelimitgen/adapters/otel"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkTelemetry is what the hook and Instrument add to a call of the
// in-process limiter, recording to a real SDK MeterProvider: compare
// "instrumented" with "bare" of the same run.
func BenchmarkTelemetry(b *testing.B) {
	tel, err := ratelimitotel.New(ratelimitotel.WithMeterProvider(
		sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	require.NoError(b, err)
	rule := &ratelimit.Rule{Name: "bench", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1 << 40}}}
	for _, c := range []struct {
		name    string
		limiter ratelimit.Limiter
	}{
		{"bare", ratelimit.NewMemory()},
		{"instrumented", tel.Instrument(ratelimit.NewMemory(ratelimit.WithHook(tel)))},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := rule.Check(ctx, c.limiter, 1, "user-42"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
