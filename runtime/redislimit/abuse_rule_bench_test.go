package redislimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkRuleCheckAbuse64 is BenchmarkRedisAbuse64's load through the
// path generated code takes: 64 goroutines call Rule.Check on one key of
// a sliding log filled before the timer, so every call is denied, by the
// deny cache. It reports Rule.Check's denials per second; compare two
// versions by alternating their test binaries.
func BenchmarkRuleCheckAbuse64(b *testing.B) {
	const goroutines = 64
	srv.Flush(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: goroutines})
	defer c.Close()
	l := New(c)
	ctx := context.Background()
	rule := &ratelimit.Rule{Name: "abuse", Limits: []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Period: time.Hour, Threshold: 1000}}}
	for i := 0; i < 1000; i++ {
		if err := rule.Check(ctx, l, 1, "mallory"); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	per := b.N/goroutines + 1
	b.ResetTimer()
	start := time.Now()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if err := rule.Check(ctx, l, 1, "mallory"); !errors.Is(err, ratelimit.ErrLimited) {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(per*goroutines)/time.Since(start).Seconds()/1e6, "Mdenials/s")
}
