package redislimit_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// BenchmarkStalledWait measures how long calls wait for a Redis that
// stalls (DEBUG SLEEP 1) for longer than the client's 50ms ReadTimeout, as
// multiples of the ReadTimeout: the longest wait ("x-readtimeout-max") and
// the 99th percentile ("x-readtimeout-p99"), with batching (the default)
// and without, in the same run; sixteen goroutines call throughout the
// stall and the breaker is off, so that every call goes to Redis. A call
// on a new connection also waits for its handshake (HELLO), a round trip
// of its own, batched or not. Run it on demand, on a quiet machine (the
// tail is the scheduler's as much as the limiter's):
//
//	go test -run '^$' -bench StalledWait -benchtime 3x ./runtime/redislimit/
func BenchmarkStalledWait(b *testing.B) {
	for _, c := range []struct {
		name  string
		batch int
	}{{"batched", redislimit.DefaultBatch}, {"unbatched", 1}} {
		b.Run(c.name, func(b *testing.B) {
			var waits []time.Duration
			for b.Loop() {
				waits = append(waits, stalledWaits(b, c.batch)...)
			}
			slices.Sort(waits)
			rt := float64(50 * time.Millisecond)
			b.ReportMetric(float64(waits[len(waits)-1])/rt, "x-readtimeout-max")
			b.ReportMetric(float64(waits[len(waits)*99/100])/rt, "x-readtimeout-p99")
		})
	}
}

// stalledWaits stalls a server for a second while calls are decided with
// batches of up to batch calls, and returns how long each call waited.
func stalledWaits(b *testing.B, batch int) []time.Duration {
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
	l := redislimit.New(client, redislimit.WithBatching(batch), redislimit.WithBreaker(0, 0, 0))
	req := ratelimit.Request{Name: "stalled", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1 << 40}}}
	ctx := context.Background()

	stalled := make(chan struct{})
	var mu sync.Mutex
	var waits []time.Duration
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
				waits = append(waits, took)
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
	return waits
}

// BenchmarkQueuedCallWait measures the case batching used to double: a
// call in flight to a stalled Redis (DEBUG SLEEP 0.4) and a second call
// that arrives 10ms later and, batched, queues behind it. It reports the
// second call's wait as a multiple of the client's 50ms ReadTimeout, on
// average ("x-readtimeout") and at worst ("x-readtimeout-max"), batched
// and not; each stall starts with four idle connections, so that no call
// waits for a handshake. Run it on demand:
//
//	go test -run '^$' -bench QueuedCallWait -benchtime 10x ./runtime/redislimit/
func BenchmarkQueuedCallWait(b *testing.B) {
	s, err := redistest.Start("enable-debug-command yes")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop()
	admin := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute})
	defer admin.Close()
	const rt = 50 * time.Millisecond
	for _, c := range []struct {
		name  string
		batch int
	}{{"batched", redislimit.DefaultBatch}, {"unbatched", 1}} {
		b.Run(c.name, func(b *testing.B) {
			client := redis.NewClient(&redis.Options{
				Addr: s.Addr, MaxRetries: -1, DialerRetries: 1, MinIdleConns: 4,
				DialTimeout: rt, ReadTimeout: rt, WriteTimeout: rt,
			})
			defer client.Close()
			l := redislimit.New(client, redislimit.WithBatching(c.batch), redislimit.WithBreaker(0, 0, 0))
			req := ratelimit.Request{Name: "queued", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1 << 40}}}
			ctx := context.Background()
			var total, worst time.Duration
			for b.Loop() {
				// Warm: the calls below find idle connections.
				var warm sync.WaitGroup
				for range 4 {
					warm.Go(func() { _ = client.Ping(ctx).Err() })
				}
				warm.Wait()
				slept := make(chan error, 1)
				go func() { slept <- admin.Do(ctx, "DEBUG", "SLEEP", 0.4).Err() }()
				time.Sleep(20 * time.Millisecond)
				go func() { _, _ = l.Allow(ctx, req) }()
				time.Sleep(10 * time.Millisecond)
				start := time.Now()
				_, _ = l.Allow(ctx, req)
				took := time.Since(start)
				total += took
				worst = max(worst, took)
				if err := <-slept; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total)/float64(b.N)/float64(rt), "x-readtimeout")
			b.ReportMetric(float64(worst)/float64(rt), "x-readtimeout-max")
		})
	}
}
