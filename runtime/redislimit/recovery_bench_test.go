package redislimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// BenchmarkBreakerRecovery measures, with the default breaker and a client
// of 50ms timeouts, how long after Redis comes back the limiter decides
// calls again ("ms-recovery"), and how long calls went undecided in all
// ("ms-undecided": under the default fail-open policy, how long the limit
// was lifted), on average, and the longest recovery of the runs
// ("ms-recovery-max"). Four goroutines call the limiter every millisecond. A
// stall is DEBUG SLEEP, which returns when the server wakes; an outage
// kills the server and starts one on the same port, and Redis is back
// when the new server answers a PING (it is polled every 20ms, so the
// figure may be short by up to 20ms). Run it on demand, a few times per
// case:
//
//	go test -run '^$' -bench BreakerRecovery -benchtime 3x ./runtime/redislimit/
func BenchmarkBreakerRecovery(b *testing.B) {
	for _, c := range []struct {
		name   string
		stall  time.Duration
		outage time.Duration
	}{
		{name: "stall=300ms", stall: 300 * time.Millisecond},
		{name: "outage=2.5s", outage: 2500 * time.Millisecond},
		{name: "outage=6s", outage: 6 * time.Second},
		{name: "outage=30s", outage: 30 * time.Second},
	} {
		b.Run(c.name, func(b *testing.B) {
			var recovery, undecided, worst time.Duration
			for b.Loop() {
				back, first, decided := recoverOnce(b, c.stall, c.outage)
				recovery += decided.Sub(back)
				undecided += decided.Sub(first)
				worst = max(worst, decided.Sub(back))
			}
			b.ReportMetric(float64(recovery.Milliseconds())/float64(b.N), "ms-recovery")
			b.ReportMetric(float64(worst.Milliseconds()), "ms-recovery-max")
			b.ReportMetric(float64(undecided.Milliseconds())/float64(b.N), "ms-undecided")
		})
	}
}

// recoverOnce runs one stall or outage and returns when Redis was back,
// when a call first failed and when Redis decided a call again.
func recoverOnce(b *testing.B, stall, outage time.Duration) (back, firstFail, decided time.Time) {
	s, err := redistest.Start("enable-debug-command yes")
	if err != nil {
		b.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{
		Addr: s.Addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
	})
	defer client.Close()
	l := redislimit.New(client)
	req := ratelimit.Request{Name: "recovery", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1 << 40}}}
	ctx := context.Background()
	if _, err := l.Allow(ctx, req); err != nil {
		b.Fatal(err)
	}

	var mu sync.Mutex
	var backAt atomic.Pointer[time.Time]
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
				_, err := l.Allow(ctx, req)
				now := time.Now()
				mu.Lock()
				if err != nil && firstFail.IsZero() {
					firstFail = now
				} else if err == nil && backAt.Load() != nil && !firstFail.IsZero() {
					once.Do(func() { decided = now; close(done) })
				}
				mu.Unlock()
			}
		})
	}
	if stall > 0 {
		admin := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: time.Minute})
		if err := admin.Do(ctx, "DEBUG", "SLEEP", stall.Seconds()).Err(); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		backAt.Store(&now)
		admin.Close()
		defer s.Stop()
	} else {
		time.Sleep(20 * time.Millisecond)
		s.Stop()
		time.Sleep(outage)
		s2, err := redistest.StartOn(s.Addr, "enable-debug-command yes")
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		backAt.Store(&now)
		defer s2.Stop()
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatal("Redis did not decide again")
	}
	wg.Wait()
	return *backAt.Load(), firstFail, decided
}
