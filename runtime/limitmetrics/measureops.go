package limitmetrics

import (
	"context"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// turn is OpTurn, measured as a decision; a call denied because others
// wait ahead of it ([ratelimit.SourceQueue]) was not decided, and moves no
// units.
func (m *Measured) turn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	start := time.Now()
	res, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpTurn, Request: req, Ticket: ticket, Wait: wait})
	charges := res.Decision.Source != ratelimit.SourceQueue
	m.decided(ctx, CallTurn, &req, res.Decision, err, time.Since(start), charges, false)
	return res.Decision, res.Ticket, res.At, err
}

// slotTurn is OpSlotTurn, measured as OpTakeSlot, with turn's exception.
func (m *Measured) slotTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	start := time.Now()
	op := ratelimit.Op{Kind: ratelimit.OpSlotTurn, Request: req, Slot: slot, Token: token, Ticket: ticket, Wait: wait}
	res, err := m.passOn(ctx, op)
	charges := res.Decision.Source != ratelimit.SourceQueue
	m.decided(ctx, CallSlotTurn, &req, res.Decision, err, time.Since(start), charges, true)
	return res.Decision, res.Ticket, res.At, err
}

// fallback is OpFallback, measured as a decision against the limits the
// fallback enforced.
func (m *Measured) fallback(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, []ratelimit.Limit, error) {
	start := time.Now()
	res, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpFallback, Request: req})
	decided := req
	if len(res.Limits) == len(req.Limits) {
		decided.Limits = res.Limits
	}
	m.decided(ctx, CallFallback, &decided, res.Decision, err, time.Since(start), true, false)
	return res.Decision, res.Limits, err
}

// cool is OpCool, measured: the cooling line, with no units.
func (m *Measured) cool(ctx context.Context, req ratelimit.Request, line int, d time.Duration) error {
	start := time.Now()
	_, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpCool, Request: req, Line: line, Wait: d})
	m.settled(ctx, req.Name, CallCool, OutcomeCooled, err, time.Since(start))
	return err
}

// reset is OpReset, measured.
func (m *Measured) reset(ctx context.Context, name, key string) error {
	start := time.Now()
	_, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpReset, Request: ratelimit.Request{Name: name, Key: key}})
	m.settled(ctx, name, CallReset, OutcomeReset, err, time.Since(start))
	return err
}

// settled observes a call that moved no units: outcome, or an error.
func (m *Measured) settled(ctx context.Context, name string, call Call, outcome Outcome, err error, took time.Duration) {
	ms := Measurement{Name: name, Call: call, Source: "backend", Outcome: outcome, Duration: took, Slot: -1}
	if err != nil {
		ms.Source, ms.Outcome = "error", OutcomeError
	}
	m.observe(ctx, ms)
}

// decided observes a call that decided req's rate limits, and a slot
// (the line after them) when withSlot is set: with charges, the units it
// charged on every line or was denied on one.
func (m *Measured) decided(ctx context.Context, call Call, req *ratelimit.Request, d ratelimit.Decision, err error, took time.Duration, charges, withSlot bool) {
	ms := Measurement{Name: req.Name, Call: call, Duration: took, Slot: -1}
	slot := -1
	if withSlot {
		slot = len(req.Limits)
	}
	switch {
	case err != nil:
		ms.Source, ms.Outcome = "error", OutcomeError
	case d.Allowed:
		ms.Source, ms.Outcome = d.Source.String(), OutcomeAllowed
		if charges {
			ms.Units, ms.Lines, ms.Slot = req.Units(), allLines(len(req.Limits)), slot
			ms.Calls = callLines(req.Limits)
		}
	default:
		ms.Source, ms.Outcome = d.Source.String(), OutcomeLimited
		switch i := d.LimitIndex; {
		case !charges:
		case i == slot:
			ms.Slot = slot
		case i >= 0 && i < len(req.Limits) && i < 32:
			ms.Units, ms.Lines = req.Units(), 1<<i
			ms.Calls = callLines(req.Limits) & ms.Lines
		}
	}
	m.observe(ctx, ms)
}

// allLines returns the mask of lines 0 to n-1 (at most 32).
func allLines(n int) uint32 {
	if n >= 32 {
		return ^uint32(0)
	}
	return 1<<n - 1
}

// costLines returns the mask of the lines among limits (at most 32) that
// take a call's cost: those that do not count calls ([ratelimit.Limit.PerCall]).
func costLines(limits []ratelimit.Limit) uint32 {
	return allLines(len(limits)) &^ callLines(limits)
}

// callLines returns the mask of the lines among limits (at most 32) that
// count calls ([ratelimit.Limit.PerCall]).
func callLines(limits []ratelimit.Limit) uint32 {
	var mask uint32
	for i, l := range limits {
		if i < 32 && l.PerCall {
			mask |= 1 << i
		}
	}
	return mask
}

var _ ratelimit.Limiter = (*Measured)(nil)
