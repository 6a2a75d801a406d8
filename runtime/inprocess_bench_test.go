package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// inProcessLimit admits every call of the benchmarks: a token bucket as
// x/time/rate's, a billion units a second.
var inProcessLimit = Limit{Algorithm: TokenBucket, Period: time.Second, Threshold: 1e9}

// BenchmarkInProcessVsXRate compares what a generated decorator adds to a
// call admitted by the in-process limiter (Rule.Check on NewMemory, one
// key) with golang.org/x/time/rate's Limiter.Allow, in alternating chunks
// of 100 calls in the same run, and reports the median chunk's time per
// call of each (a chunk a busy machine preempted lands in the tail) and
// ours as a ratio to x/time/rate's.
func BenchmarkInProcessVsXRate(b *testing.B) {
	ctx := context.Background()
	l := NewMemory()
	rule := &Rule{Name: "bench", Limits: []Limit{inProcessLimit}}
	x := rate.NewLimiter(rate.Limit(1e9), 1e9)
	const chunk = 100
	chunks := (b.N + chunk - 1) / chunk
	ours, theirs := make([]time.Duration, 0, chunks), make([]time.Duration, 0, chunks)
	b.ReportAllocs()
	for range chunks {
		t0 := time.Now()
		for range chunk {
			if !x.Allow() {
				b.Fatal("x/time/rate denied")
			}
		}
		t1 := time.Now()
		for range chunk {
			if err := rule.Check(ctx, l, 1, "user-42"); err != nil {
				b.Fatal(err)
			}
		}
		ours, theirs = append(ours, time.Since(t1)), append(theirs, t1.Sub(t0))
	}
	reportVsXRate(b, median(ours)/chunk, median(theirs)/chunk)
}

// BenchmarkInProcessVsXRateParallel is BenchmarkInProcessVsXRate from 64
// goroutines, each on a key of its own (and a rate.Limiter of its own):
// rounds of 6,400 calls of x/time/rate then 6,400 of ours, shared by the
// goroutines, and the median round's time per call of each.
func BenchmarkInProcessVsXRateParallel(b *testing.B) {
	const goroutines, round = 64, 6400
	ctx := context.Background()
	l := NewMemory()
	rule := &Rule{Name: "bench", Limits: []Limit{inProcessLimit}}
	keys := make([]string, goroutines)
	xs := make([]*rate.Limiter, goroutines)
	for g := range goroutines {
		keys[g] = fmt.Sprint("user-", g)
		xs[g] = rate.NewLimiter(rate.Limit(1e9), 1e9)
	}
	// phase makes round calls of call from the goroutines, and returns how
	// long they took.
	phase := func(call func(g int) bool) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for g := range goroutines {
			wg.Go(func() {
				for next.Add(1) <= round {
					if !call(g) {
						b.Error("denied")
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	theirs := func(g int) bool { return xs[g].Allow() }
	ours := func(g int) bool { return rule.Check(ctx, l, 1, keys[g]) == nil }
	rounds := (b.N + round - 1) / round
	var to, tt []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range rounds {
		tt = append(tt, phase(theirs))
		to = append(to, phase(ours))
	}
	reportVsXRate(b, median(to)/round, median(tt)/round)
}

// reportVsXRate reports the time per call of ours and of x/time/rate's,
// and their ratio.
func reportVsXRate(b *testing.B, ours, theirs time.Duration) {
	b.ReportMetric(float64(ours), "check-ns")
	b.ReportMetric(float64(theirs), "xrate-ns")
	b.ReportMetric(float64(ours)/float64(theirs), "check/xrate")
}

// BenchmarkMemoryAllow reports the in-process decision's cost per
// algorithm (Allow on NewMemory, the request made by hand), on one key
// whose calls are all admitted.
func BenchmarkMemoryAllow(b *testing.B) {
	for _, alg := range Algorithms() {
		b.Run(string(alg), func(b *testing.B) {
			l := NewMemory()
			ctx := context.Background()
			lim := Limit{Algorithm: alg, Period: time.Second, Threshold: 1_000_000_000}
			if alg == SlidingWindow {
				lim.Threshold = MaxSlidingWindowThreshold
			}
			req := Request{Name: "bench", Key: "user-42", Limits: []Limit{lim}}
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := l.Allow(ctx, req); !d.Allowed {
					b.Fatal(d)
				}
			}
		})
	}
}

// BenchmarkMemoryAllowParallel is BenchmarkMemoryAllow's sliding log from
// GOMAXPROCS goroutines, each on a key of its own.
func BenchmarkMemoryAllowParallel(b *testing.B) {
	l := NewMemory()
	ctx := context.Background()
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := Request{Name: "bench", Key: fmt.Sprint(id.Add(1)), Limits: []Limit{{Period: time.Second, Threshold: 1_000_000}}}
		for pb.Next() {
			l.Allow(ctx, req)
		}
	})
}

// BenchmarkRuleCheckMemory is what a generated decorator adds to an
// admitted call on the in-process limiter.
func BenchmarkRuleCheckMemory(b *testing.B) {
	l := NewMemory()
	ctx := context.Background()
	rule := &Rule{Name: "bench", Limits: []Limit{{Period: time.Second, Threshold: 1 << 40}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := rule.Check(ctx, l, 1, "user-42"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWaitRuleCheck is Rule.Check of a rule with a wait on the
// memory limiter from parallel goroutines over 1,024 keys, every call
// admitted: each takes its pair's queue shard lock (see Queuer), so no
// call is decided past a waiting one, and allocates nothing while nobody
// waits. no_wait is the same rule without its wait, the baseline.
func BenchmarkWaitRuleCheck(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		wait time.Duration
	}{{"wait", time.Second}, {"no_wait", 0}} {
		b.Run(c.name, func(b *testing.B) {
			l := NewMemory()
			r := &Rule{Name: "wait", Limits: []Limit{{Algorithm: GCRA, Period: time.Hour, Threshold: 1 << 40}}, Wait: c.wait}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					if err := r.Check(ctx, l, 1, keys[i&1023]); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
