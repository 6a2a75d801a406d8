package ratelimitprom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// DefaultBuckets are the upper bounds, in seconds, of the buckets of the
// histogram of [Instrument]: from 25 µs (an in-process decision or a
// cached denial) to 1 s (a Redis call that times out).
var DefaultBuckets = []float64{0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// Limiter is a [ratelimit.Limiter] that measures how long the limiter it
// wraps takes to answer each call, and a [prometheus.Collector] of the
// measurements:
//
//	ratelimit_decision_duration_seconds{name, source}
//
// a histogram per limit name and source: the Source of the
// [ratelimit.Decision] the wrapped limiter returned ("backend", or "cache"
// for a denial answered from a deny cache) and "error" for a call it could
// not decide. Its count is the number of calls, so it also counts the
// decisions per source. Each attempt of a waiting call is one call; the
// time a call waits or is paced is not counted, nor the decisions that the
// local fallback makes after an error under onerror=local (the Metrics
// hook counts those).
//
// It is a [ratelimit.Wrapper]: [ratelimit.Rule.Check] uses the overrides
// and error policy of the wrapped limiter, so wrapping changes no decision.
type Limiter struct {
	next     ratelimit.Limiter
	duration *prometheus.HistogramVec
}

// Instrument returns limiter wrapped in a [Limiter] whose histogram has
// buckets (in seconds), or [DefaultBuckets] when none are given. Register
// it with a prometheus.Registerer to export the histogram.
func Instrument(limiter ratelimit.Limiter, buckets ...float64) *Limiter {
	if len(buckets) == 0 {
		buckets = DefaultBuckets
	}
	return &Limiter{
		next: limiter,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ratelimit_decision_duration_seconds",
			Help:    "How long the rate limiter took to answer a call, by limit name and decision source.",
			Buckets: buckets,
		}, []string{"name", "source"}),
	}
}

// Allow asks the wrapped limiter and records how long it took.
func (l *Limiter) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	start := time.Now()
	d, err := l.next.Allow(ctx, req)
	source := "error"
	if err == nil {
		source = d.Source.String()
	}
	l.duration.WithLabelValues(req.Name, source).Observe(time.Since(start).Seconds())
	return d, err
}

// Unwrap returns the wrapped limiter.
func (l *Limiter) Unwrap() ratelimit.Limiter { return l.next }

// Describe sends the histogram's descriptor.
func (l *Limiter) Describe(ch chan<- *prometheus.Desc) { l.duration.Describe(ch) }

// Collect sends the histogram of every limit name and source seen so far.
func (l *Limiter) Collect(ch chan<- prometheus.Metric) { l.duration.Collect(ch) }

var (
	_ ratelimit.Wrapper    = (*Limiter)(nil)
	_ prometheus.Collector = (*Limiter)(nil)
)
