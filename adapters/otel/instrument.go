package ratelimitotel

import (
	"context"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// Limiter is a [ratelimit.Limiter] that measures every call it passes on
// to the limiter it wraps (see [limitmetrics.Measured]) and records
//
//	ratelimit.decision.duration  s       {ratelimit.name, ratelimit.call, ratelimit.source}
//	ratelimit.calls              {call}  {ratelimit.name, ratelimit.call, ratelimit.outcome}
//	ratelimit.units              {unit}  {ratelimit.name, ratelimit.line, ratelimit.outcome}
//
// The call is the call of the backend contract ([AttrCall]: allow for a
// plain check, turn for a waiting call's try, reserve and adjust for a
// settle= rule's charge and settlement, reserve_slot, slot_turn,
// release_slot and renew_slot for a concurrency= rule's slot, peek and
// peek_slot, cool, reset, fallback: see [limitmetrics.Call]); the source
// is the Source of the [ratelimit.Decision] ("backend", or "cache" for a
// denial answered from a deny cache), "backend" for a call that decides
// nothing, and "error" for a call the wrapped limiter could not answer.
// The units are the calls' costs each line moved ([AttrLine], the index
// of the rule's limit; a concurrency slot is the line after the rate
// limits, one unit a slot): an admission's on every line, a denial's on
// the line that denied it, a settlement's refund or addition. No
// attribute holds a key. Each try of a waiting call is one call, and each
// decision of the local fallback after an error under onerror=local (call
// "fallback"); the time a call sleeps or is paced is not counted.
//
// It wraps the limiter (see [limitmetrics.Measured]): it sees every call,
// and reports the wrapped limiter's abilities and configuration, so
// wrapping changes no decision.
type Limiter struct {
	*limitmetrics.Measured
	t *Telemetry
}

// Instrument returns limiter wrapped in a [Limiter] that records to t.
func (t *Telemetry) Instrument(limiter ratelimit.Limiter) *Limiter {
	l := &Limiter{t: t}
	l.Measured = limitmetrics.Measure(limiter, l.record)
	return l
}

// record records one measurement.
func (l *Limiter) record(ctx context.Context, m limitmetrics.Measurement) {
	t := l.t
	t.duration.Record(ctx, m.Duration.Seconds(), t.attributes(attrKey{name: m.Name, call: string(m.Call), source: m.Source}).record...)
	t.calls.Add(ctx, 1, t.attributes(attrKey{name: m.Name, call: string(m.Call), outcome: string(m.Outcome)}).add...)
	m.EachLine(func(line int, units int64) {
		t.units.Add(ctx, units, t.attributes(attrKey{name: m.Name, line: line + 1, outcome: string(m.Outcome)}).add...)
	})
}

var _ ratelimit.Limiter = (*Limiter)(nil)
