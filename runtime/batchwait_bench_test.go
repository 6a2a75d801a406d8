package ratelimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkStalledWait measures the longest a call waits for a Redis that
// stalls (DEBUG SLEEP 1) for longer than the client's 50ms ReadTimeout,
// as a multiple of the ReadTimeout ("x-readtimeout-max"), with batching
// (the default) and without; sixteen goroutines call throughout the stall
// and the breaker is off, so that every call goes to Redis. Run it on
// demand:
//
//	go test -run '^$' -bench StalledWait -benchtime 3x ./runtime/
func BenchmarkStalledWait(b *testing.B) {
	for _, c := range []struct {
		name  string
		batch int
	}{{"batched", ratelimit.DefaultBatch}, {"unbatched", 1}} {
		b.Run(c.name, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				worst = max(worst, stalledWait(b, c.batch))
			}
			b.ReportMetric(float64(worst)/float64(50*time.Millisecond), "x-readtimeout-max")
		})
	}
}

// stalledWait stalls a server for a second while calls are decided with
// batches of up to batch calls, and returns the longest wait of a call.
func stalledWait(b *testing.B, batch int) time.Duration {
	s, err := redistest.Start("enable-debug-command yes")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	client := redis.NewClient(&redis.Options{
		Addr: s.Addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
	})
	defer client.Close()
	l := ratelimit.NewRedis(client, ratelimit.WithBatching(batch), ratelimit.WithBreaker(0, 0, 0))
	req := ratelimit.Request{Name: "stalled", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1 << 40}}}
	ctx := context.Background()

	stalled := make(chan struct{})
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stalled:
					return
				default:
				}
				start := time.Now()
				_, _ = l.Allow(ctx, req)
				took := time.Since(start)
				mu.Lock()
				worst = max(worst, took)
				mu.Unlock()
			}
		})
	}
	admin := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute})
	defer admin.Close()
	time.Sleep(50 * time.Millisecond)
	if err := admin.Do(ctx, "DEBUG", "SLEEP", 1).Err(); err != nil {
		b.Fatal(err)
	}
	close(stalled)
	wg.Wait()
	return worst
}
