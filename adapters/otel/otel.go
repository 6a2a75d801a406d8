// Package ratelimitotel reports ratelimitgen's limiters to OpenTelemetry:
// [Telemetry] is a hook that counts decisions, backend failures and
// circuit breakers' openings and adds events to the caller's span, and [Telemetry.Instrument] wraps a
// limiter to record how long it takes to decide.
//
//	tel, err := ratelimitotel.New() // the global MeterProvider
//	if err != nil { ... }
//	limiter := tel.Instrument(redislimit.New(client, ratelimit.WithHook(tel)))
//
// It is a module of its own, so the runtime depends on no telemetry
// library. The call's key (a user id, an address) is recorded nowhere: it
// is often personal data, and one series per key would be unbounded.
package ratelimitotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// ScopeName is the instrumentation scope of the meter [New] uses.
const ScopeName = "github.com/ratelimitgen/ratelimitgen/adapters/otel"

// The attributes of the metrics and span events.
const (
	// AttrName is the limit's name ([ratelimit.Request.Name]).
	AttrName = attribute.Key("ratelimit.name")
	// AttrDecision is "allowed", "limited" or "shadow_limited".
	AttrDecision = attribute.Key("ratelimit.decision")
	// AttrSource is what made the decision: "backend", "cache",
	// "fallback", "override" or "lease" ([ratelimit.Source]); on the duration histogram, "error"
	// for a call the wrapped limiter could not decide.
	AttrSource = attribute.Key("ratelimit.source")
	// AttrRetryAfter is a denial's RetryAfter in seconds.
	AttrRetryAfter = attribute.Key("ratelimit.retry_after")
	// AttrLimit is the limit that denied a call, such as "2/30s (sliding_log)".
	AttrLimit = attribute.Key("ratelimit.limit")
	// AttrNode is the node of a circuit breaker: the address of a Redis
	// server, or of a cluster master (see [ratelimit.BreakerHook]).
	AttrNode = attribute.Key("ratelimit.node")
	// AttrCall is the call of the backend contract that [Limiter]
	// measured: allow, turn, reserve, adjust, reserve_slot, slot_turn,
	// release_slot, renew_slot, peek, peek_slot, cool, reset or fallback
	// ([limitmetrics.Call]).
	AttrCall = attribute.Key("ratelimit.call")
	// AttrOutcome is what a measured call did: allowed, limited, error,
	// refunded, added, released... ([limitmetrics.Outcome]).
	AttrOutcome = attribute.Key("ratelimit.outcome")
	// AttrLine is the line of a rule whose units ratelimit.units counts:
	// the index of its limit, a concurrency slot the one after the rate
	// limits.
	AttrLine = attribute.Key("ratelimit.line")
)

// The names of the span events.
const (
	EventLimited       = "ratelimit.limited"
	EventShadowLimited = "ratelimit.shadow_limited"
	EventBackendError  = "ratelimit.backend_error"
)

// DefaultBuckets are the explicit bucket boundaries, in seconds, of the
// duration histogram: from 25 µs (an in-process decision or a cached
// denial) to 1 s (a Redis call that times out).
var DefaultBuckets = []float64{0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// Telemetry is a [ratelimit.ShadowHook] and a [ratelimit.BreakerHook]
// that records, per limit name or per circuit breaker's node:
//
//	ratelimit.decisions       counter         {ratelimit.name, ratelimit.decision, ratelimit.source}
//	ratelimit.near_limit      counter         {ratelimit.name}
//	ratelimit.backend_errors  counter         {ratelimit.name}
//	ratelimit.breaker.open    updowncounter   {ratelimit.node}
//	ratelimit.breaker.opens   counter         {ratelimit.node}
//
// ratelimit.near_limit counts the admissions that left at most 10% of the
// threshold of the limit with the fewest units remaining, as
// limitmetrics.Counters NearLimit does. ratelimit.breaker.open is 1 while
// the circuit breaker of a Redis node is open and 0 once it has closed
// (summed over processes, how many of their breakers of the node are open),
// and ratelimit.breaker.opens counts its openings; a node has neither
// until its breaker first opens.
//
// It adds an event to the span in the call's context (if it records)
// for each denial ([EventLimited]), would-be denial of a shadow rule
// ([EventShadowLimited]) and backend failure ([EventBackendError]). Give it
// to a limiter with [ratelimit.WithHook]; [Telemetry.Instrument] adds the
// latency histogram. It is safe for concurrent use.
type Telemetry struct {
	decisions     metric.Int64Counter
	nearLimit     metric.Int64Counter
	backendErrors metric.Int64Counter
	breakerOpen   metric.Int64UpDownCounter
	breakerOpens  metric.Int64Counter
	inFlight      metric.Int64UpDownCounter
	duration      metric.Float64Histogram
	calls         metric.Int64Counter
	units         metric.Int64Counter
	meter         metric.Meter

	mu    sync.RWMutex
	attrs map[attrKey]measurement
}

// measurement holds the options of a measurement with one attribute set,
// as the slices the instruments take, so that recording allocates nothing.
type measurement struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// attrKey identifies an attribute set the Telemetry has built; empty
// fields are left out of it.
type attrKey struct {
	name, decision, source, node, call, outcome string
	line                                        int // +1: 0 when absent
}

// Option configures [New].
type Option func(*config)

type config struct {
	meterProvider metric.MeterProvider
	buckets       []float64
}

// WithMeterProvider makes the Telemetry record to mp instead of the
// global MeterProvider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithBuckets sets the bucket boundaries, in seconds, of the duration
// histogram (default [DefaultBuckets]).
func WithBuckets(boundaries ...float64) Option {
	return func(c *config) { c.buckets = boundaries }
}

// New returns a Telemetry recording to the meter [ScopeName] of the
// MeterProvider; it fails only if the provider cannot make its
// instruments.
func New(opts ...Option) (*Telemetry, error) {
	c := config{buckets: DefaultBuckets}
	for _, o := range opts {
		o(&c)
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	meter := c.meterProvider.Meter(ScopeName)
	t := &Telemetry{attrs: make(map[attrKey]measurement), meter: meter}
	var err error
	if t.decisions, err = meter.Int64Counter("ratelimit.decisions",
		metric.WithDescription("Rate limit decisions, by limit name, decision and source."),
		metric.WithUnit("{decision}")); err != nil {
		return nil, err
	}
	if t.nearLimit, err = meter.Int64Counter("ratelimit.near_limit",
		metric.WithDescription("Admissions that left at most 10% of the limit's threshold."),
		metric.WithUnit("{decision}")); err != nil {
		return nil, err
	}
	if t.backendErrors, err = meter.Int64Counter("ratelimit.backend_errors",
		metric.WithDescription("Calls the rate limiter's backend could not decide."),
		metric.WithUnit("{call}")); err != nil {
		return nil, err
	}
	if t.breakerOpen, err = meter.Int64UpDownCounter("ratelimit.breaker.open",
		metric.WithDescription("Circuit breakers of a Redis node that are open: 1 while open, 0 when closed."),
		metric.WithUnit("{breaker}")); err != nil {
		return nil, err
	}
	if t.breakerOpens, err = meter.Int64Counter("ratelimit.breaker.opens",
		metric.WithDescription("Times the circuit breaker of a Redis node opened."),
		metric.WithUnit("{opening}")); err != nil {
		return nil, err
	}
	if t.inFlight, err = meter.Int64UpDownCounter("ratelimit.in_flight",
		metric.WithDescription("Calls holding a slot of a concurrency limit, by limit name."),
		metric.WithUnit("{call}")); err != nil {
		return nil, err
	}
	if t.calls, err = meter.Int64Counter("ratelimit.calls",
		metric.WithDescription("Calls the rate limiter answered, by limit name, call and outcome."),
		metric.WithUnit("{call}")); err != nil {
		return nil, err
	}
	if t.units, err = meter.Int64Counter("ratelimit.units",
		metric.WithDescription("Units (costs) the rate limiter's calls charged, denied, refunded or added, by limit name, line and outcome."),
		metric.WithUnit("{unit}")); err != nil {
		return nil, err
	}
	if t.duration, err = meter.Float64Histogram("ratelimit.decision.duration",
		metric.WithDescription("How long the rate limiter took to answer a call, by limit name, call and decision source."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(c.buckets...)); err != nil {
		return nil, err
	}
	return t, nil
}

// Decided counts d (and an admission near its limit) and adds
// [EventLimited] to the span of ctx for a denial. See [ratelimit.Hook].
func (t *Telemetry) Decided(ctx context.Context, req *ratelimit.Request, d ratelimit.Decision) {
	decision := "allowed"
	if !d.Allowed {
		decision = "limited"
		denialEvent(ctx, EventLimited, req, d)
	} else if nearLimit(req, d) {
		t.nearLimit.Add(ctx, 1, t.attributes(attrKey{name: req.Name}).add...)
	}
	t.decisions.Add(ctx, 1, t.attributes(attrKey{name: req.Name, decision: decision, source: d.Source.String()}).add...)
}

// InFlight adds delta to the calls holding a slot of name's concurrency
// limit (1 when a call takes one, -1 when it gives it back).
func (t *Telemetry) InFlight(ctx context.Context, name string, delta int) {
	t.inFlight.Add(ctx, int64(delta), t.attributes(attrKey{name: name}).add...)
}

// ShadowLimited counts a would-be denial and adds [EventShadowLimited] to
// the span of ctx. See [ratelimit.ShadowHook].
func (t *Telemetry) ShadowLimited(ctx context.Context, req *ratelimit.Request, d ratelimit.Decision) {
	denialEvent(ctx, EventShadowLimited, req, d)
	t.decisions.Add(ctx, 1, t.attributes(attrKey{name: req.Name, decision: "shadow_limited", source: d.Source.String()}).add...)
}

// Failed counts a backend failure and adds [EventBackendError], with the
// error's text, to the span of ctx. See [ratelimit.Hook].
func (t *Telemetry) Failed(ctx context.Context, req *ratelimit.Request, err error) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventBackendError, trace.WithAttributes(
			AttrName.String(req.Name),
			attribute.String("exception.message", err.Error()),
		))
	}
	t.backendErrors.Add(ctx, 1, t.attributes(attrKey{name: req.Name}).add...)
}

// BreakerOpened counts the opening of node's breaker and marks it open.
// See [ratelimit.BreakerHook].
func (t *Telemetry) BreakerOpened(node string, _ error) {
	add := t.attributes(attrKey{node: node}).add
	t.breakerOpens.Add(context.Background(), 1, add...)
	t.breakerOpen.Add(context.Background(), 1, add...)
}

// BreakerClosed marks node's breaker closed. See [ratelimit.BreakerHook].
func (t *Telemetry) BreakerClosed(node string, _ time.Duration) {
	t.breakerOpen.Add(context.Background(), -1, t.attributes(attrKey{node: node}).add...)
}

// nearLimit reports whether the admission d left at most 10% of the
// threshold of the limit it describes, as limitmetrics.Metrics counts it.
func nearLimit(req *ratelimit.Request, d ratelimit.Decision) bool {
	if d.LimitIndex < 0 || d.LimitIndex >= len(req.Limits) {
		return false
	}
	return d.Remaining <= req.Limits[d.LimitIndex].Threshold/10
}

// denialEvent adds the event name about the denial d of req to the span
// of ctx, if it records.
func denialEvent(ctx context.Context, name string, req *ratelimit.Request, d ratelimit.Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		AttrName.String(req.Name),
		AttrRetryAfter.Float64(d.RetryAfter.Seconds()),
		AttrSource.String(d.Source.String()),
	}
	if d.LimitIndex >= 0 && d.LimitIndex < len(req.Limits) {
		attrs = append(attrs, AttrLimit.String(req.Limits[d.LimitIndex].String()))
	}
	span.AddEvent(name, trace.WithAttributes(attrs...))
}

// attributes returns the options of a measurement with the attribute set
// k, building them once.
func (t *Telemetry) attributes(k attrKey) measurement {
	t.mu.RLock()
	o, ok := t.attrs[k]
	t.mu.RUnlock()
	if ok {
		return o
	}
	var attrs []attribute.KeyValue
	if k.node != "" {
		attrs = append(attrs, AttrNode.String(k.node))
	} else {
		attrs = append(attrs, AttrName.String(k.name))
	}
	if k.decision != "" {
		attrs = append(attrs, AttrDecision.String(k.decision))
	}
	if k.source != "" {
		attrs = append(attrs, AttrSource.String(k.source))
	}
	if k.call != "" {
		attrs = append(attrs, AttrCall.String(k.call))
	}
	if k.outcome != "" {
		attrs = append(attrs, AttrOutcome.String(k.outcome))
	}
	if k.line > 0 {
		attrs = append(attrs, AttrLine.Int(k.line-1))
	}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	o = measurement{add: []metric.AddOption{set}, record: []metric.RecordOption{set}}
	t.mu.Lock()
	t.attrs[k] = o
	t.mu.Unlock()
	return o
}

var (
	_ ratelimit.ShadowHook  = (*Telemetry)(nil)
	_ ratelimit.BreakerHook = (*Telemetry)(nil)
)

// OverridesReporter is a source of overrides that reports the fields it
// cannot use, such as *redislimit.Overrides.
type OverridesReporter interface {
	// Rejected counts the fields that could not be used, each once per value.
	Rejected() uint64
	// Problems returns the fields that cannot be used now.
	Problems() []*ratelimit.FieldError
}

// ObserveOverrides reports, at each collection, what src cannot use:
//
//	ratelimit.override.rejections  counter  fields that could not be used, each once per value
//	ratelimit.override.problems    gauge    fields that cannot be used now (each keeps its last good value)
func (t *Telemetry) ObserveOverrides(src OverridesReporter) error {
	rejections, err := t.meter.Int64ObservableCounter("ratelimit.override.rejections",
		metric.WithDescription("Fields of the overrides that could not be used, each counted once per value."),
		metric.WithUnit("{field}"))
	if err != nil {
		return err
	}
	problems, err := t.meter.Int64ObservableGauge("ratelimit.override.problems",
		metric.WithDescription("Fields of the overrides that cannot be used now; each keeps its last good value."),
		metric.WithUnit("{field}"))
	if err != nil {
		return err
	}
	_, err = t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(rejections, int64(src.Rejected()))
		o.ObserveInt64(problems, int64(len(src.Problems())))
		return nil
	}, rejections, problems)
	return err
}
