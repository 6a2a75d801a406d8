package guard_test

import (
	"context"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// BenchmarkLeasesHotLine: calls of one leased line from every goroutine
// (b.RunParallel), the limit never reached: the cost of an admission from
// a lease in process, over the in-process limiter.
func BenchmarkLeasesHotLine(b *testing.B) {
	g := guard.NewLeases(ratelimit.NewMemory())
	defer g.Close()
	req := ratelimit.Request{Name: "hot", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1 << 40, Prefetch: 100 * time.Millisecond}}}
	ctx := context.Background()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if d, err := g.Allow(ctx, req); err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
		}
	})
	_, served := g.Stats()
	b.ReportMetric(float64(served)/float64(b.N), "from-leases/op")
}
