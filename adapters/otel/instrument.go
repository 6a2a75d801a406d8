package ratelimitotel

import (
	"context"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Limiter is a [ratelimit.Limiter] that records how long the limiter it
// wraps takes to answer each call in the histogram
//
//	ratelimit.decision.duration  seconds  {ratelimit.name, ratelimit.source}
//
// where the source is the Source of the [ratelimit.Decision] the wrapped
// limiter returned ("backend", or "cache" for a denial answered from a
// deny cache) or "error" for a call it could not decide. Each attempt of a
// waiting call is one call; the time a call waits or is paced is not
// counted, nor the decisions the local fallback makes after an error under
// onerror=local (the hook counts those, with source "fallback").
//
// It is a [ratelimit.Wrapper]: [ratelimit.Rule.Check] uses the overrides
// and error policy of the wrapped limiter, so wrapping changes no decision.
type Limiter struct {
	next ratelimit.Limiter
	t    *Telemetry
}

// Instrument returns limiter wrapped in a [Limiter] that records to t.
func (t *Telemetry) Instrument(limiter ratelimit.Limiter) *Limiter {
	return &Limiter{next: limiter, t: t}
}

// Allow asks the wrapped limiter and records how long it took.
func (l *Limiter) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	start := time.Now()
	d, err := l.next.Allow(ctx, req)
	source := "error"
	if err == nil {
		source = d.Source.String()
	}
	l.t.duration.Record(ctx, time.Since(start).Seconds(), l.t.attributes(attrKey{name: req.Name, source: source}).record...)
	return d, err
}

// Unwrap returns the wrapped limiter.
func (l *Limiter) Unwrap() ratelimit.Limiter { return l.next }

var _ ratelimit.Wrapper = (*Limiter)(nil)
