package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkRedisAbuse64 is one key far over its limit, the load a rate
// limiter exists for: 64 goroutines call on it, and over 99% of their
// calls are denied. It runs PING, go-redis/redis_rate (GCRA, one script
// run per call), our limiter with its deny cache (the default) and
// without it, in alternating rounds of a fixed time on one client of 64
// connections, and reports each one's calls per second and ours as ratios
// to PING's and redis_rate's, and each one's Redis commands per call
// (INFO commandstats, the commands its scripts run included). Each
// algorithm is a sub-benchmark.
func BenchmarkRedisAbuse64(b *testing.B) {
	for _, alg := range ratelimit.Algorithms() {
		b.Run(string(alg), func(b *testing.B) { benchAbuse(b, alg) })
	}
}

func benchAbuse(b *testing.B, alg ratelimit.Algorithm) {
	const goroutines, threshold = 64, 1000
	const round = 200 * time.Millisecond
	srv.Flush(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: goroutines})
	defer c.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	ctx := context.Background()
	req := ratelimit.Request{Name: "abuse", Key: "mallory", Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: threshold}}}
	cached := New(c)
	plain := New(c, WithDenyCache(0), WithPrefix("plain:"))
	rr := redis_rate.NewLimiter(c)
	rrLimit := redis_rate.PerHour(threshold)
	var denied, decided atomic.Int64
	ours := func(l *Limiter) func() error {
		return func() error {
			d, err := l.Allow(ctx, req)
			decided.Add(1)
			if !d.Allowed {
				denied.Add(1)
			}
			return err
		}
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"ping", func() error { return c.Ping(ctx).Err() }},
		{"redis_rate", func() error {
			_, err := rr.Allow(ctx, "abuse", rrLimit)
			return err
		}},
		{"cached", ours(cached)},
		{"uncached", ours(plain)},
	}
	// run calls op from every goroutine for about a round (each looks at
	// the time every 8 calls) and returns how many calls were made and how
	// long they took.
	run := func(op func() error) (int64, time.Duration) {
		var n atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		end := start.Add(round)
		for range goroutines {
			wg.Go(func() {
				k := int64(0)
				for ; k&7 != 0 || time.Now().Before(end); k++ {
					if err := op(); err != nil {
						b.Error(err)
						return
					}
				}
				n.Add(k)
			})
		}
		wg.Wait()
		return n.Load(), time.Since(start)
	}
	for _, o := range ops { // warm up: fill the limits, open the connections
		run(o.op)
	}
	denied.Store(0)
	decided.Store(0)
	calls := make([]int64, len(ops))
	took := make([]time.Duration, len(ops))
	cmds := make([]uint64, len(ops))
	b.ResetTimer()
	for range b.N {
		for i, o := range ops {
			if err := admin.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			n, d := run(o.op)
			calls[i], took[i] = calls[i]+n, took[i]+d
			cmds[i] += commandsRun(b, admin)
		}
	}
	b.StopTimer()
	rate := make([]float64, len(ops))
	for i, o := range ops {
		rate[i] = float64(calls[i]) / took[i].Seconds()
		b.ReportMetric(rate[i], o.name+"/s")
		b.ReportMetric(float64(cmds[i])/float64(calls[i]), o.name+"-cmds/call")
	}
	b.ReportMetric(rate[2]/rate[0], "cached/ping")
	b.ReportMetric(rate[2]/rate[1], "cached/redis_rate")
	b.ReportMetric(rate[3]/rate[0], "uncached/ping")
	b.ReportMetric(rate[3]/rate[1], "uncached/redis_rate")
	b.ReportMetric(100*float64(denied.Load())/float64(decided.Load()), "%denied")
}
