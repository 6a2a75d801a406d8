package ratelimit

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRuleCheckAdmission is what WithAdmission costs the calls of
// generated decorators on the in-process limiter: Check as it was before
// it looked for a carrier (the check it wraps), interleaved in chunks of
// 100 calls with Check given context.Background(), a request's context
// (a cancel and a few values, which the lookup walks through) and a
// request's context with a carrier. It reports the median chunk's time
// per call of each.
func BenchmarkRuleCheckAdmission(b *testing.B) {
	rule := &Rule{Name: "bench", Limits: []Limit{{Period: time.Second, Threshold: 1 << 40}}}
	type key int
	request := context.Background()
	for i := range 3 {
		request = context.WithValue(request, key(i), i)
	}
	request, cancel := context.WithCancel(request)
	defer cancel()
	request = context.WithValue(request, key(3), 3)
	carrier, _ := WithAdmission(request)
	l := NewMemory()
	calls := []struct {
		name string
		call func() error
	}{
		{"bare-ns/op", func() error { var o outcome; return rule.check(request, l, []string{"user-42"}, 1, &o) }},
		{"background-ns/op", func() error { return rule.Check(context.Background(), l, 1, "user-42") }},
		{"request-ns/op", func() error { return rule.Check(request, l, 1, "user-42") }},
		{"carrier-ns/op", func() error { return rule.Check(carrier, l, 1, "user-42") }},
	}
	const chunk = 100
	chunks := (b.N + chunk - 1) / chunk
	times := make([][]time.Duration, len(calls))
	b.ReportAllocs()
	for range chunks {
		for i, c := range calls {
			start := time.Now()
			for range chunk {
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	for i, c := range calls {
		b.ReportMetric(float64(median(times[i]))/chunk, c.name)
	}
	b.ReportMetric(0, "ns/op")
}
