package ratelimitprom_test

import (
	"context"
	"testing"
	"time"

	ratelimitprom "github.com/ratelimitgen/ratelimitgen/adapters/prometheus"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkInstrument is what Instrument adds to a call of the in-process
// limiter: compare "instrumented" with "bare" of the same run.
func BenchmarkInstrument(b *testing.B) {
	rule := &ratelimit.Rule{Name: "bench", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1 << 40}}}
	for _, c := range []struct {
		name    string
		limiter ratelimit.Limiter
	}{
		{"bare", ratelimit.NewMemory()},
		{"instrumented", ratelimitprom.Instrument(ratelimit.NewMemory())},
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
