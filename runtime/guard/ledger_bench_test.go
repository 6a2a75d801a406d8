package guard_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// BenchmarkFallbackBackendAdmits: calls that the backend admits through
// the fallback guard alone (a Carrier that keeps its state in process and
// keeps marks, so the fallback's ledger records each admission), the
// limit never reached: the cost the fallback adds to each admission of
// the backend, on one key from one goroutine, and on 64 keys from every
// goroutine (b.RunParallel).
func BenchmarkFallbackBackendAdmits(b *testing.B) {
	lim := []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1 << 40}}
	run := func(b *testing.B, parallel bool) {
		backend := newMarkFlaky("bench-" + b.Name())
		f := fallbackAlone(backend)
		defer f.Close()
		ctx := context.Background()
		b.ReportAllocs()
		if !parallel {
			req := ratelimit.Request{Name: "hot", Key: "k", Limits: lim}
			for b.Loop() {
				if d, err := f.Allow(ctx, req); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
			return
		}
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			req := ratelimit.Request{Name: "hot", Limits: lim}
			for i := 0; pb.Next(); i++ {
				req.Key = benchKeys[i%len(benchKeys)]
				if d, err := f.Allow(ctx, req); err != nil || !d.Allowed {
					b.Fatal(d, err)
				}
			}
		})
	}
	b.Run("one_key", func(b *testing.B) { run(b, false) })
	b.Run("64_keys_parallel", func(b *testing.B) { run(b, true) })
}

// benchKeys are the keys of the parallel benchmark.
var benchKeys = func() []string {
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
}()

var (
	_ guard.Carrier     = (*markFlaky)(nil)
	_ guard.Heartbeater = (*markFlaky)(nil)
)

// BenchmarkFallbackLocalAdmits: calls that the fallback admits in process
// (AllowLocal, as while the backend is down), the limit never reached, on
// one key: the cost of its decision and of remembering the admission to
// carry it back.
func BenchmarkFallbackLocalAdmits(b *testing.B) {
	f := fallbackAlone(newMarkFlaky("bench-local"), guard.WithFallbackProcesses(1))
	defer f.Close()
	req := ratelimit.Request{Name: "hot", Key: "k", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1 << 40}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, _, err := f.AllowLocal(ctx, req); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkFallbackLocalDenies: calls that the fallback denies in process
// (AllowLocal, as while the backend is down, the share spent), on one key:
// what most calls cost during an outage, the admissions being bounded by
// the shares.
func BenchmarkFallbackLocalDenies(b *testing.B) {
	f := fallbackAlone(newMarkFlaky("bench-deny"), guard.WithFallbackProcesses(1))
	defer f.Close()
	req := ratelimit.Request{Name: "hot", Key: "k", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1}}}
	ctx := context.Background()
	if d, _, err := f.AllowLocal(ctx, req); err != nil || !d.Allowed {
		b.Fatal(d, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if d, _, err := f.AllowLocal(ctx, req); err != nil || d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// fallbackAlone returns the fallback guard of backend, as guard.Wrap makes
// it with opts, with no other guard in front that could answer for it.
func fallbackAlone(backend ratelimit.Limiter, opts ...guard.Option) *guard.Fallback {
	opts = append(opts, guard.WithDenyCache(0), guard.WithBreaker(0, 0, 0))
	f, _ := guard.Of[*guard.Fallback](guard.Wrap(backend, opts...))
	return f
}
