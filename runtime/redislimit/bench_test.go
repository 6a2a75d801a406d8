package redislimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// naiveScript is the seeds' sliding log: a ZSET scored by timestamp plus
// ZREMRANGEBYSCORE, ZCARD, ZADD and EXPIRE. It is a baseline for the
// benchmarks, not part of the product (it undercounts calls that share a
// timestamp, and reads the app server's clock).
var naiveScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], 0, now - window)
if redis.call("ZCARD", KEYS[1]) < tonumber(ARGV[3]) then
  redis.call("ZADD", KEYS[1], now, now)
  redis.call("EXPIRE", KEYS[1], math.ceil(window / 1000000))
  return 1
end
return 0
`)

// noopScript does nothing: the floor any script decision stands on.
var noopScript = redis.NewScript(`return 1`)

func benchRequest(key string) ratelimit.Request {
	return ratelimit.Request{Name: "bench", Key: key, Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1_000_000}}}
}

// BenchmarkRedisDecisionVsPing interleaves PING, a decision of one
// algorithm, a no-op script, the same decision by the generic script
// (see withGenericScript) and a decision of go-redis/redis_rate (GCRA,
// one script run per call, admitted every time) on one connection (for
// the sliding log also the naive ZSET script) and reports each one's
// median latency as a ratio to PING's, so machine load shifts affect all
// alike. Each algorithm is a
// sub-benchmark; the request is admitted every time, as most calls are.
//
// leaky_bucket_paced is a leaky bucket whose calls are all told to wait
// (its queue fills at 1,000 per second), whose reply is the full array.
// sliding_log_trimming is a sliding log whose window (2 ms) is always
// full of entries expiring, so that each call trims the log and sets its
// TTL again (see lua/sliding_log.lua.tmpl).
func BenchmarkRedisDecisionVsPing(b *testing.B) {
	for _, alg := range ratelimit.Algorithms() {
		lim := benchRequest("").Limits[0]
		lim.Algorithm = alg
		b.Run(string(alg), func(b *testing.B) { benchDecisionVsPing(b, lim) })
	}
	paced := ratelimit.Limit{Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 1000, Capacity: 1_000_000}
	b.Run("leaky_bucket_paced", func(b *testing.B) { benchDecisionVsPing(b, paced) })
	steady := ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Period: 2 * time.Millisecond, Threshold: 1_000_000}
	b.Run("sliding_log_trimming", func(b *testing.B) { benchDecisionVsPing(b, steady) })
}

func benchDecisionVsPing(b *testing.B, lim ratelimit.Limit) {
	srv.Flush(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	defer c.Close()
	ctx := context.Background()
	l := New(c)
	g := newTest(c, WithPrefix("generic:"), withGenericScript())
	rr := redis_rate.NewLimiter(c)
	rrLimit := redis_rate.PerSecond(1_000_000)
	req := ratelimit.Request{Name: "bench", Limits: []ratelimit.Limit{lim}}
	alg := lim.AlgorithmOrDefault()
	for _, s := range []*redis.Script{naiveScript, noopScript} {
		if err := s.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, l := range []*Limiter{l, g} {
		if _, err := l.Allow(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	naiveToo := alg == ratelimit.SlidingLog
	ping := make([]time.Duration, 0, b.N)
	decide := make([]time.Duration, 0, b.N)
	naive := make([]time.Duration, 0, b.N)
	noop := make([]time.Duration, 0, b.N)
	generic := make([]time.Duration, 0, b.N)
	rrate := make([]time.Duration, 0, b.N)
	if _, err := rr.Allow(ctx, "bench", rrLimit); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		t2 := time.Now()
		if naiveToo {
			now := time.Now().UnixMicro()
			if err := naiveScript.EvalSha(ctx, c, []string{"naive"}, now, 1_000_000, 1_000_000).Err(); err != nil {
				b.Fatal(err)
			}
		}
		t3 := time.Now()
		if err := noopScript.EvalSha(ctx, c, []string{"noop"}).Err(); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		if d, err := g.Allow(ctx, req); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		t5 := time.Now()
		if r, err := rr.Allow(ctx, "bench", rrLimit); err != nil || r.Allowed == 0 {
			b.Fatal(r, err)
		}
		t6 := time.Now()
		ping = append(ping, t1.Sub(t0))
		decide = append(decide, t2.Sub(t1))
		naive = append(naive, t3.Sub(t2))
		noop = append(noop, t4.Sub(t3))
		generic = append(generic, t5.Sub(t4))
		rrate = append(rrate, t6.Sub(t5))
	}
	b.StopTimer()
	p := median(ping)
	b.ReportMetric(float64(p.Nanoseconds()), "ping-ns")
	b.ReportMetric(float64(median(decide))/float64(p), "decide/ping")
	b.ReportMetric(float64(median(generic))/float64(p), "generic/ping")
	if naiveToo {
		b.ReportMetric(float64(median(naive))/float64(p), "naive/ping")
	}
	b.ReportMetric(float64(median(noop))/float64(p), "noop/ping")
	b.ReportMetric(float64(median(rrate))/float64(p), "redis_rate/ping")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkRedisDecisionAlone decides the request of benchRequest for
// each algorithm, nothing else, on one connection: its allocations
// (-benchmem) are the client's cost of a lone decision, which repeat run
// after run, unlike its round trip.
func BenchmarkRedisDecisionAlone(b *testing.B) {
	for _, alg := range ratelimit.Algorithms() {
		b.Run(string(alg), func(b *testing.B) {
			srv.Flush(b)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
			defer c.Close()
			l := New(c)
			defer l.Close()
			req := benchRequest("")
			req.Limits[0].Algorithm = alg
			b.ReportAllocs()
			for b.Loop() {
				if d, err := l.Allow(b.Context(), req); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
		})
	}
}

// BenchmarkRedisThroughput64 runs PING, unbatched decisions, batched
// decisions (the default, the same keys), a no-op script and
// go-redis/redis_rate's decisions (GCRA, one script run per call, the same
// keys) from 64 goroutines in alternating rounds, on one client of 64
// connections, and reports each one's throughput as a ratio to PING's.
// Every call is admitted (sliding log, 10^6 per second per key).
func BenchmarkRedisThroughput64(b *testing.B) {
	srv.Flush(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	defer c.Close()
	ctx := context.Background()
	l := New(c, WithBatching(0)) // one script run per call
	lb := New(c)                 // batching, the default
	const goroutines = 64
	run := func(op func(g int) error) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if err := op(g); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	ping := func(int) error { return c.Ping(ctx).Err() }
	decide := func(g int) error {
		_, err := l.Allow(ctx, benchRequest(fmt.Sprint(g)))
		return err
	}
	batched := func(g int) error {
		_, err := lb.Allow(ctx, benchRequest(fmt.Sprint(g)))
		return err
	}
	noop := func(int) error { return noopScript.Run(ctx, c, []string{"noop"}).Err() }
	rr := redis_rate.NewLimiter(c)
	rrLimit := redis_rate.PerSecond(1_000_000)
	rrate := func(g int) error {
		r, err := rr.Allow(ctx, fmt.Sprint(g), rrLimit)
		if err == nil && r.Allowed == 0 {
			err = fmt.Errorf("redis_rate denied %+v", r)
		}
		return err
	}
	run(ping) // warm the pool
	run(noop)
	run(batched)
	run(rrate)
	b.ResetTimer()
	var tp, td, tb, tn, tr time.Duration
	for range 3 {
		tp += run(ping)
		td += run(decide)
		tb += run(batched)
		tn += run(noop)
		tr += run(rrate)
	}
	b.StopTimer()
	b.ReportMetric(float64(3*b.N)/tp.Seconds(), "ping/s")
	b.ReportMetric(float64(3*b.N)/td.Seconds(), "decide/s")
	b.ReportMetric(float64(3*b.N)/tb.Seconds(), "batched/s")
	b.ReportMetric(tp.Seconds()/td.Seconds(), "decide/ping-throughput")
	b.ReportMetric(tp.Seconds()/tb.Seconds(), "batched/ping-throughput")
	b.ReportMetric(tp.Seconds()/tn.Seconds(), "noop/ping-throughput")
	b.ReportMetric(tp.Seconds()/tr.Seconds(), "redis_rate/ping-throughput")
	b.ReportMetric(tr.Seconds()/tb.Seconds(), "batched/redis_rate-throughput")
}

// BenchmarkRedisMemoryPerCall reports the Redis memory of a sliding-log key
// holding 10,000 in-window calls, per call, beside the naive ZSET's.
func BenchmarkRedisMemoryPerCall(b *testing.B) {
	const calls = 10_000
	ctx := context.Background()
	c := srv.Client()
	defer c.Close()
	var ours, zset int64
	for range b.N {
		srv.Flush(b)
		l := New(c)
		req := ratelimit.Request{Name: "mem", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: calls}}}
		for range calls {
			if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
		}
		for i := range calls {
			naiveScript.Run(ctx, c, []string{"naive"}, int64(i), 3_600_000_000, calls)
		}
		ours = c.MemoryUsage(ctx, l.Key("mem", "", 0, ratelimit.SlidingLog), 0).Val()
		zset = c.MemoryUsage(ctx, "naive", 0).Val()
	}
	b.ReportMetric(float64(ours)/calls, "bytes/call")
	b.ReportMetric(float64(zset)/calls, "zset-bytes/call")
}

// BenchmarkRedisMemoryPerKey reports the Redis memory (MEMORY USAGE) of
// one key of each counter algorithm, averaged over 1,000 keys with a few
// calls each, in the state a busy key is in: a sliding window with both
// its windows' counts, a bucket with a fractional TAT.
func BenchmarkRedisMemoryPerKey(b *testing.B) {
	ctx := context.Background()
	c := srv.Client()
	defer c.Close()
	for _, alg := range ratelimit.Algorithms()[1:] {
		b.Run(string(alg), func(b *testing.B) {
			const keys = 1000
			srv.Flush(b)
			clock := newManualClock()
			l := New(c, ratelimit.WithClock(clock))
			lim := []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 7_000}}
			for _, step := range []time.Duration{0, time.Second / 3, time.Second} {
				clock.Advance(step)
				for k := range keys {
					if d, err := l.Allow(ctx, ratelimit.Request{Name: "mem", Key: fmt.Sprint("user-", k), Limits: lim}); err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
				}
			}
			var bytes int64
			for range b.N {
				bytes = 0
				for k := range keys {
					bytes += c.MemoryUsage(ctx, l.Key("mem", fmt.Sprint("user-", k), 0, alg), 0).Val()
				}
			}
			b.ReportMetric(float64(bytes)/keys, "bytes/key")
		})
	}
}
