package redislimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// BenchmarkClusterDeadMasterCost measures what a call whose key lives on a
// master that fails costs with a cluster client of 100ms timeouts, one
// attempt per node (MaxRetries -1, DialerRetries 1) and the breaker off,
// for go-redis's default MaxRedirects (3), for 1 (what ClusterOptions
// sets) and for -1 (none): "ms-call" on average and "ms-call-max", over
// ten calls, first while the master is paused (CLIENT PAUSE: it accepts
// connections and does not answer), then after it is killed. Run it on
// demand:
//
//	go test -run '^$' -bench ClusterDeadMasterCost -benchtime 1x ./runtime/redislimit/
func BenchmarkClusterDeadMasterCost(b *testing.B) {
	cluster, err := redistest.StartCluster(3)
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Stop()
	victim := cluster.Addrs()[0]
	ctx := context.Background()
	for _, state := range []string{"paused", "killed"} {
		if state == "paused" {
			admin := redis.NewClient(&redis.Options{Addr: victim})
			if err := admin.ClientPause(ctx, time.Minute).Err(); err != nil {
				b.Fatal(err)
			}
			admin.Close()
		} else {
			cluster.Kill(0)
		}
		for _, redirects := range []int{0, 1, -1} {
			b.Run(fmt.Sprintf("%s/MaxRedirects=%d", state, redirects), func(b *testing.B) {
				for b.Loop() {
					mean, worst := deadMasterCost(b, cluster, victim, redirects)
					b.ReportMetric(float64(mean.Microseconds())/1000, "ms-call")
					b.ReportMetric(float64(worst.Microseconds())/1000, "ms-call-max")
				}
			})
		}
	}
}

// deadMasterCost times ten calls on victim's keys with a fresh client.
func deadMasterCost(b *testing.B, cluster *redistest.Cluster, victim string, redirects int) (mean, worst time.Duration) {
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cluster.Addrs(), MaxRedirects: redirects, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
	})
	defer c.Close()
	l := redislimit.New(c, redislimit.WithBreaker(0, 0, 0))
	ctx := context.Background()
	var req ratelimit.Request
	for i := 0; req.Name == ""; i++ {
		name := fmt.Sprintf("dead-%d", i)
		m, err := c.MasterForKey(ctx, l.Key(name, "", 0, ratelimit.SlidingLog))
		if err != nil {
			b.Fatal(err)
		}
		if m.Options().Addr == victim {
			req = ratelimit.Request{Name: name, Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1000}}}
		}
	}
	var total time.Duration
	for range 10 {
		start := time.Now()
		if _, err := l.Allow(ctx, req); err == nil {
			b.Fatal("a failed master decided a call")
		}
		took := time.Since(start)
		total += took
		worst = max(worst, took)
	}
	return total / 10, worst
}
