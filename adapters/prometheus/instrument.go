package ratelimitprom

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// DefaultBuckets are the upper bounds, in seconds, of the buckets of the
// histogram of [Instrument]: from 25 µs (an in-process decision or a
// cached denial) to 1 s (a Redis call that times out).
var DefaultBuckets = []float64{0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// Limiter is a [ratelimit.Limiter] that measures every call it passes on
// to the limiter it wraps (see [limitmetrics.Measured]), and a
// [prometheus.Collector] of the measurements:
//
//	ratelimit_decision_duration_seconds{name, call, source}  histogram
//	ratelimit_calls_total{name, call, outcome}               counter
//	ratelimit_units_total{name, line, outcome}               counter
//
// call is the call of the backend contract (allow for a plain check,
// turn for a waiting call's try, reserve and adjust for a settle= rule's
// charge and settlement, reserve_slot, slot_turn, release_slot and
// renew_slot for a concurrency= rule's slot, peek and peek_slot, cool,
// reset, fallback: see [limitmetrics.Call]); source is the Source
// of the [ratelimit.Decision] ("backend", or "cache" for a denial answered
// from a deny cache), "backend" for a call that decides nothing, and
// "error" for a call the wrapped limiter could not answer; outcome is
// allowed, limited, error, refunded, added, released, renewed... (see
// [limitmetrics.Outcome]). The units counter counts the units (the calls'
// costs) each line moved, where line is the index of the rule's limit
// ("0" for its first line; a concurrency slot is the line after the rate
// limits, one unit a slot): an admission's on every line, a denial's on
// the line that denied it, a settlement's refund or addition. No label
// holds a key. Each try of a waiting call is one call, and each decision
// of the local fallback after an error under onerror=local (call
// "fallback"); the time a call sleeps or is paced is not counted.
//
// It wraps the limiter (see [limitmetrics.Measured]): it sees every call,
// and reports the wrapped limiter's abilities and configuration, so
// wrapping changes no decision.
type Limiter struct {
	*limitmetrics.Measured
	duration *prometheus.HistogramVec
	calls    *prometheus.CounterVec
	units    *prometheus.CounterVec
}

// Instrument returns limiter wrapped in a [Limiter] whose histogram has
// buckets (in seconds), or [DefaultBuckets] when none are given. Register
// it with a prometheus.Registerer to export its metrics.
func Instrument(limiter ratelimit.Limiter, buckets ...float64) *Limiter {
	if len(buckets) == 0 {
		buckets = DefaultBuckets
	}
	l := &Limiter{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ratelimit_decision_duration_seconds",
			Help:    "How long the rate limiter took to answer a call, by limit name, call and decision source.",
			Buckets: buckets,
		}, []string{"name", "call", "source"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_calls_total",
			Help: "Calls the rate limiter answered, by limit name, call and outcome.",
		}, []string{"name", "call", "outcome"}),
		units: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_units_total",
			Help: "Units (costs) the rate limiter's calls charged, denied, refunded or added, by limit name, line (the limit's index) and outcome.",
		}, []string{"name", "line", "outcome"}),
	}
	l.Measured = limitmetrics.Measure(limiter, l.record)
	return l
}

// lineLabels are the line label's values of the first lines.
var lineLabels = [...]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"}

func lineLabel(i int) string {
	if i < len(lineLabels) {
		return lineLabels[i]
	}
	return strconv.Itoa(i)
}

// record exports one measurement.
func (l *Limiter) record(_ context.Context, m limitmetrics.Measurement) {
	l.duration.WithLabelValues(m.Name, string(m.Call), m.Source).Observe(m.Duration.Seconds())
	l.calls.WithLabelValues(m.Name, string(m.Call), string(m.Outcome)).Inc()
	m.EachLine(func(line int, units int64) {
		l.units.WithLabelValues(m.Name, lineLabel(line), string(m.Outcome)).Add(float64(units))
	})
}

// Describe sends the descriptors of the metrics.
func (l *Limiter) Describe(ch chan<- *prometheus.Desc) {
	l.duration.Describe(ch)
	l.calls.Describe(ch)
	l.units.Describe(ch)
}

// Collect sends the series of every limit name seen so far.
func (l *Limiter) Collect(ch chan<- prometheus.Metric) {
	l.duration.Collect(ch)
	l.calls.Collect(ch)
	l.units.Collect(ch)
}

var (
	_ ratelimit.Limiter    = (*Limiter)(nil)
	_ prometheus.Collector = (*Limiter)(nil)
)
