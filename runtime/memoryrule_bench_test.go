package ratelimit

import (
	"context"
	"testing"
	"time"
)

// BenchmarkMemoryReserveRule is the memory limiter's decision of a rule's
// request off the fast path (OpReserve, as Rule.Reserve and the guards
// pass it on), whose plans it keeps per rule, in alternating chunks of 100
// calls with the same request without its Rule (plans made on each call):
// the median chunk's time per call of each.
func BenchmarkMemoryReserveRule(b *testing.B) {
	ctx := context.Background()
	l := NewMemory()
	rule := &Rule{Name: "bench", Limits: []Limit{inProcessLimit}}
	withRule := Request{Name: rule.Name, Key: "user-42", Limits: rule.Limits, Rule: rule}
	without := withRule
	without.Rule = nil
	const chunk = 100
	chunks := (b.N + chunk - 1) / chunk
	ours, bare := make([]time.Duration, 0, chunks), make([]time.Duration, 0, chunks)
	b.ReportAllocs()
	for range chunks {
		t0 := time.Now()
		for range chunk {
			if d, _, err := l.Reserve(ctx, without); err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
		}
		t1 := time.Now()
		for range chunk {
			if d, _, err := l.Reserve(ctx, withRule); err != nil || !d.Allowed {
				b.Fatal(d, err)
			}
		}
		ours, bare = append(ours, time.Since(t1)), append(bare, t1.Sub(t0))
	}
	b.ReportMetric(float64(median(ours)/chunk), "rule-ns")
	b.ReportMetric(float64(median(bare)/chunk), "norule-ns")
}
