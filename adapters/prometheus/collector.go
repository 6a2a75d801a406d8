// Package ratelimitprom exports ratelimitgen's limiters to Prometheus: a
// [Collector] of the counters a [ratelimit.Metrics] hook keeps, and
// [Instrument], which measures how long the limiter takes to decide.
//
//	metrics := &ratelimit.Metrics{}
//	limiter := ratelimitprom.Instrument(redislimit.New(client, ratelimit.WithHook(metrics)))
//	prometheus.MustRegister(ratelimitprom.NewCollector(metrics), limiter)
//
// It is a module of its own, so the runtime depends on no metrics library.
package ratelimitprom

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Collector exports the counters of a [ratelimit.Metrics] hook, read at
// each scrape:
//
//	ratelimit_decisions_total{name, decision}  decision: allowed, limited, shadow_limited
//	ratelimit_near_limit_total{name}           admissions that left at most 10% of the threshold
//	ratelimit_backend_errors_total{name}       calls the backend could not decide
//	ratelimit_fallback_decisions_total{name}   decisions of the in-process fallback (onerror=local)
//	ratelimit_cached_denials_total{name}       denials the Redis limiter's deny cache repeated
//
// name is the limit's name (the method's, or a directive's name=).
type Collector struct {
	metrics *ratelimit.Metrics
}

// NewCollector returns a Collector of metrics, which the limiter must be
// given as its hook ([ratelimit.WithHook]).
func NewCollector(metrics *ratelimit.Metrics) *Collector {
	return &Collector{metrics: metrics}
}

var (
	decisionsDesc = prometheus.NewDesc("ratelimit_decisions_total",
		"Rate limit decisions, by limit name and decision.", []string{"name", "decision"}, nil)
	nearLimitDesc = prometheus.NewDesc("ratelimit_near_limit_total",
		"Admissions that left at most 10% of the limit's threshold.", []string{"name"}, nil)
	backendErrorsDesc = prometheus.NewDesc("ratelimit_backend_errors_total",
		"Calls the rate limiter's backend could not decide.", []string{"name"}, nil)
	fallbackDesc = prometheus.NewDesc("ratelimit_fallback_decisions_total",
		"Decisions made in process while the backend could not decide (onerror=local).", []string{"name"}, nil)
	cachedDesc = prometheus.NewDesc("ratelimit_cached_denials_total",
		"Denials, real or shadow, repeated from the local deny cache without asking Redis.", []string{"name"}, nil)
)

// Describe sends the descriptors of the metrics Collect sends.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- decisionsDesc
	ch <- nearLimitDesc
	ch <- backendErrorsDesc
	ch <- fallbackDesc
	ch <- cachedDesc
}

// Collect sends the counters of every limit name seen so far.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	snapshot := c.metrics.Snapshot()
	for _, name := range slices.Sorted(maps.Keys(snapshot)) {
		n := snapshot[name]
		counter(decisionsDesc, n.Allowed, name, "allowed")
		counter(decisionsDesc, n.Limited, name, "limited")
		counter(decisionsDesc, n.ShadowLimited, name, "shadow_limited")
		counter(nearLimitDesc, n.NearLimit, name)
		counter(backendErrorsDesc, n.BackendErrors, name)
		counter(fallbackDesc, n.Fallback, name)
		counter(cachedDesc, n.Cached, name)
	}
}

var _ prometheus.Collector = (*Collector)(nil)
