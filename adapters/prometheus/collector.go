// Package ratelimitprom exports ratelimitgen's limiters to Prometheus: a
// [Collector] of the counters a [limitmetrics.Metrics] hook keeps, and
// [Instrument], which measures how long the limiter takes to decide.
//
//	metrics := &limitmetrics.Metrics{}
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
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// Collector exports the counters of a [limitmetrics.Metrics] hook, read at
// each scrape:
//
//	ratelimit_decisions_total{name, decision, source}  decision: allowed, limited, shadow_limited
//	ratelimit_near_limit_total{name}                   admissions that left at most 10% of the threshold
//	ratelimit_backend_errors_total{name}               calls the backend could not decide
//	ratelimit_fallback_decisions_total{name}           decisions of the in-process fallback (onerror=local)
//	ratelimit_cached_denials_total{name}               denials the Redis limiter's deny cache repeated
//	ratelimit_in_flight{name}                          calls of this process holding a slot of the name's concurrency limit
//	ratelimit_breaker_open{node}                       1 while the circuit breaker of node is open, else 0
//	ratelimit_breaker_opens_total{node}                times the circuit breaker of node opened
//
// name is the limit's name (the method's, or a directive's name=); source
// is what made the decisions: "backend" (Redis, or the process for the
// memory limiter), "cache" (the Redis limiter's deny cache: denials only),
// "fallback" (onerror=local), "override" (an override that blocks a key:
// denials only) or "lease" (admissions from a lease, prefetch=: admissions
// only), so a name has 11 decision series, and
// sum without (source) gives the decisions by name and decision. node is
// the address of a Redis server (or cluster master) whose breaker has
// opened at least once since the process started: alert on
// ratelimit_breaker_open == 1, or on increase(ratelimit_breaker_opens_total[5m]) > 0
// to catch openings shorter than the scrape interval.
type Collector struct {
	metrics *limitmetrics.Metrics
}

// NewCollector returns a Collector of metrics, which the limiter must be
// given as its hook ([ratelimit.WithHook]).
func NewCollector(metrics *limitmetrics.Metrics) *Collector {
	return &Collector{metrics: metrics}
}

var (
	decisionsDesc = prometheus.NewDesc("ratelimit_decisions_total",
		"Rate limit decisions, by limit name, decision and source (backend, cache, fallback, override or lease).", []string{"name", "decision", "source"}, nil)
	nearLimitDesc = prometheus.NewDesc("ratelimit_near_limit_total",
		"Admissions that left at most 10% of the limit's threshold.", []string{"name"}, nil)
	backendErrorsDesc = prometheus.NewDesc("ratelimit_backend_errors_total",
		"Calls the rate limiter's backend could not decide.", []string{"name"}, nil)
	fallbackDesc = prometheus.NewDesc("ratelimit_fallback_decisions_total",
		"Decisions made in process while the backend could not decide (onerror=local).", []string{"name"}, nil)
	cachedDesc = prometheus.NewDesc("ratelimit_cached_denials_total",
		"Denials, real or shadow, repeated from the local deny cache without asking Redis.", []string{"name"}, nil)
	inFlightDesc = prometheus.NewDesc("ratelimit_in_flight",
		"Calls of this process holding a slot of the limit's concurrency limit.", []string{"name"}, nil)
	breakerOpenDesc = prometheus.NewDesc("ratelimit_breaker_open",
		"Whether the circuit breaker of a Redis node is open (1) or closed (0).", []string{"node"}, nil)
	breakerOpensDesc = prometheus.NewDesc("ratelimit_breaker_opens_total",
		"Times the circuit breaker of a Redis node opened.", []string{"node"}, nil)
)

// Describe sends the descriptors of the metrics Collect sends.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- decisionsDesc
	ch <- nearLimitDesc
	ch <- backendErrorsDesc
	ch <- fallbackDesc
	ch <- cachedDesc
	ch <- inFlightDesc
	ch <- breakerOpenDesc
	ch <- breakerOpensDesc
}

// sources are the sources of decisions, in the order Collect sends them.
var sources = []ratelimit.Source{ratelimit.SourceBackend, ratelimit.SourceCache, ratelimit.SourceFallback, ratelimit.SourceOverride, ratelimit.SourceLease}

// Collect sends the counters of every limit name and breaker seen so far.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	snapshot := c.metrics.Snapshot()
	var bySource [5]map[string]limitmetrics.Counters
	for i, s := range sources {
		bySource[i] = c.metrics.SnapshotSource(s)
	}
	for _, name := range slices.Sorted(maps.Keys(snapshot)) {
		n := snapshot[name]
		for i, s := range sources {
			d, source := bySource[i][name], s.String()
			if s != ratelimit.SourceCache && s != ratelimit.SourceOverride { // these only deny
				counter(decisionsDesc, d.Allowed, name, "allowed", source)
			}
			if s != ratelimit.SourceLease { // this only admits
				counter(decisionsDesc, d.Limited, name, "limited", source)
				counter(decisionsDesc, d.ShadowLimited, name, "shadow_limited", source)
			}
		}
		counter(nearLimitDesc, n.NearLimit, name)
		counter(backendErrorsDesc, n.BackendErrors, name)
		counter(fallbackDesc, n.Fallback, name)
		counter(cachedDesc, n.Cached, name)
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(n.InFlight), name)
	}
	breakers := c.metrics.Breakers()
	for _, node := range slices.Sorted(maps.Keys(breakers)) {
		b := breakers[node]
		open := 0.0
		if b.Open {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(breakerOpenDesc, prometheus.GaugeValue, open, node)
		counter(breakerOpensDesc, b.Opened, node)
	}
}

var _ prometheus.Collector = (*Collector)(nil)

// OverridesReporter is a source of overrides that reports the fields it
// cannot use, such as *redislimit.Overrides.
type OverridesReporter interface {
	// Rejected counts the fields that could not be used, each once per value.
	Rejected() uint64
	// Problems returns the fields that cannot be used now.
	Problems() []*ratelimit.FieldError
}

// OverridesCollector exports what a source of overrides reports, read at
// each scrape:
//
//	ratelimit_override_rejections_total  fields that could not be used, each counted once per value
//	ratelimit_override_problems          fields that cannot be used now (each keeps its last good value)
//
// alert on ratelimit_override_problems > 0: an operator's change did not
// take effect.
type OverridesCollector struct {
	src OverridesReporter
}

// NewOverridesCollector returns an OverridesCollector of src.
func NewOverridesCollector(src OverridesReporter) *OverridesCollector {
	return &OverridesCollector{src: src}
}

var (
	overrideRejectionsDesc = prometheus.NewDesc("ratelimit_override_rejections_total",
		"Fields of the overrides that could not be used, each counted once per value.", nil, nil)
	overrideProblemsDesc = prometheus.NewDesc("ratelimit_override_problems",
		"Fields of the overrides that cannot be used now; each keeps its last good value.", nil, nil)
)

// Describe sends the descriptors of the metrics Collect sends.
func (c *OverridesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- overrideRejectionsDesc
	ch <- overrideProblemsDesc
}

// Collect sends the source's counts.
func (c *OverridesCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(overrideRejectionsDesc, prometheus.CounterValue, float64(c.src.Rejected()))
	ch <- prometheus.MustNewConstMetric(overrideProblemsDesc, prometheus.GaugeValue, float64(len(c.src.Problems())))
}

var _ prometheus.Collector = (*OverridesCollector)(nil)
