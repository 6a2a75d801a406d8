package limitmetrics

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Call names the call of a limiter that a [Measurement] measured.
type Call string

// The calls a [Measured] limiter measures: every call of the backend
// contract that decides, charges or gives back units.
const (
	CallAllow       Call = "allow"        // Allow: a plain check (Rule.Check)
	CallReserve     Call = "reserve"      // Reserver.Reserve: a settle= rule's charge (Rule.Reserve)
	CallAdjust      Call = "adjust"       // Reserver.Adjust: its settlement (Reservation.Settle)
	CallReserveSlot Call = "reserve_slot" // SlotHolder.ReserveSlot: a concurrency= rule's slot and rate limits
	CallReleaseSlot Call = "release_slot" // SlotHolder.ReleaseSlot: the slot given back
	CallRenewSlot   Call = "renew_slot"   // SlotHolder.RenewSlot: its lease renewed
	CallPeek        Call = "peek"         // Peeker.Peek: a look that charges nothing
	CallPeekSlot    Call = "peek_slot"    // SlotHolder.PeekSlot: a look at the slots
)

// Outcome is what a measured call did.
type Outcome string

// The outcomes of a [Measurement].
const (
	OutcomeAllowed   Outcome = "allowed"   // admitted (for a peek: would admit)
	OutcomeLimited   Outcome = "limited"   // denied (for a peek: would deny)
	OutcomeError     Outcome = "error"     // the limiter could not answer
	OutcomeRefunded  Outcome = "refunded"  // an Adjust gave units back
	OutcomeAdded     Outcome = "added"     // an Adjust charged units on top
	OutcomeUnchanged Outcome = "unchanged" // an Adjust of zero units
	OutcomeReleased  Outcome = "released"  // a slot given back
	OutcomeRenewed   Outcome = "renewed"   // a slot's lease renewed
	OutcomeExpired   Outcome = "expired"   // a renewal found the slot no longer held
)

// Measurement is one call that a [Measured] limiter passed on: how long
// it took, what it did, and the units it moved on each line (a limit of
// the request, by its index; a concurrency slot is the line after the
// rate limits). It holds no key.
type Measurement struct {
	// Name is the request's limit name.
	Name string
	// Call is the call measured.
	Call Call
	// Source is the Source of the decision ("backend", "cache",
	// "fallback"), "backend" for a call that decides nothing and
	// succeeded, or "error" for a call that failed.
	Source string
	// Outcome is what the call did.
	Outcome Outcome
	// Duration is how long the wrapped limiter took to answer.
	Duration time.Duration
	// Units is the units moved on each line of Lines: the call's units
	// (its cost) charged or denied, or an Adjust's refund or addition.
	Units int64
	// Lines has bit i set for each line i that moved Units: every rate
	// limit of an admitted call, the one that denied a denied call.
	Lines uint32
	// Slot is the line of the concurrency slot taken, denied or given
	// back (one unit: a slot), or -1.
	Slot int
}

// EachLine calls f with each line the call moved units on, in order, and
// the units: Units for each of Lines, 1 for the Slot.
func (m *Measurement) EachLine(f func(line int, units int64)) {
	for l := m.Lines; l != 0; l &= l - 1 {
		f(bits.TrailingZeros32(l), m.Units)
	}
	if m.Slot >= 0 {
		f(m.Slot, 1)
	}
}

// Measured is a [ratelimit.Wrapper] that measures every call it passes
// on to the limiter it wraps (see [Call]) and gives each [Measurement] to
// an observer, such as the Prometheus and OpenTelemetry adapters' record
// functions. It offers the capabilities of the backend contract that
// decide or move units (Reserver, SlotHolder, Peeker), passing each on
// to the wrapped limiter's (found with [ratelimit.As]); one the wrapped
// limiter lacks fails with an error wrapping errors.ErrUnsupported and
// [ratelimit.ErrInvalidLimit]. The others (Configured, Resetter,
// Fallback) are found through Unwrap, so wrapping changes no decision.
// Each attempt of a waiting call is one call; the time it waits is not
// measured, nor the decisions of the local fallback after an error
// (onerror=local; the hook sees those).
type Measured struct {
	next     ratelimit.Limiter
	reserver ratelimit.Reserver
	slots    ratelimit.SlotHolder
	peeker   ratelimit.Peeker
	observe  func(context.Context, Measurement)
}

// Measure returns next wrapped in a [Measured] limiter that gives the
// measurement of each call to observe, on the caller's goroutine, after
// the call.
func Measure(next ratelimit.Limiter, observe func(context.Context, Measurement)) *Measured {
	m := &Measured{next: next, observe: observe}
	m.reserver, _ = ratelimit.As[ratelimit.Reserver](next)
	m.slots, _ = ratelimit.As[ratelimit.SlotHolder](next)
	m.peeker, _ = ratelimit.As[ratelimit.Peeker](next)
	return m
}

// Unwrap returns the wrapped limiter.
func (m *Measured) Unwrap() ratelimit.Limiter { return m.next }

// Allow passes req on and measures the call. See [ratelimit.Limiter].
func (m *Measured) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	start := time.Now()
	d, err := m.next.Allow(ctx, req)
	m.decided(ctx, CallAllow, &req, d, err, time.Since(start), true, false)
	return d, err
}

// Reserve passes req on and measures the call. See [ratelimit.Reserver].
func (m *Measured) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	if m.reserver == nil {
		return ratelimit.Decision{}, time.Time{}, unsupported(m.next, "settle reservations")
	}
	start := time.Now()
	d, at, err := m.reserver.Reserve(ctx, req)
	m.decided(ctx, CallReserve, &req, d, err, time.Since(start), true, false)
	return d, at, err
}

// Adjust passes the call on and measures it: the units refunded or added
// on each rate limit of req. See [ratelimit.Reserver].
func (m *Measured) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if m.reserver == nil {
		return unsupported(m.next, "settle reservations")
	}
	start := time.Now()
	err := m.reserver.Adjust(ctx, req, at, delta)
	ms := Measurement{Name: req.Name, Call: CallAdjust, Source: "backend", Duration: time.Since(start), Slot: -1}
	switch {
	case err != nil:
		ms.Source, ms.Outcome = "error", OutcomeError
	case delta < 0:
		ms.Outcome, ms.Units, ms.Lines = OutcomeRefunded, -delta, allLines(len(req.Limits))
	case delta > 0:
		ms.Outcome, ms.Units, ms.Lines = OutcomeAdded, delta, allLines(len(req.Limits))
	default:
		ms.Outcome = OutcomeUnchanged
	}
	m.observe(ctx, ms)
	return err
}

// ReserveSlot passes the call on and measures it: an admission moves the
// call's units on each rate limit and takes a slot, the line after them.
// See [ratelimit.SlotHolder].
func (m *Measured) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	if m.slots == nil {
		return ratelimit.Decision{}, time.Time{}, unsupported(m.next, "hold concurrency slots")
	}
	start := time.Now()
	d, at, err := m.slots.ReserveSlot(ctx, req, slot, token)
	m.decided(ctx, CallReserveSlot, &req, d, err, time.Since(start), true, true)
	return d, at, err
}

// ReleaseSlot passes the call on and measures it. See [ratelimit.SlotHolder].
func (m *Measured) ReleaseSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) error {
	if m.slots == nil {
		return unsupported(m.next, "hold concurrency slots")
	}
	start := time.Now()
	err := m.slots.ReleaseSlot(ctx, req, slot, token)
	ms := Measurement{Name: req.Name, Call: CallReleaseSlot, Source: "backend", Outcome: OutcomeReleased, Duration: time.Since(start), Slot: len(req.Limits)}
	if err != nil {
		ms.Source, ms.Outcome, ms.Slot = "error", OutcomeError, -1
	}
	m.observe(ctx, ms)
	return err
}

// RenewSlot passes the call on and measures it. See [ratelimit.SlotHolder].
func (m *Measured) RenewSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (bool, error) {
	if m.slots == nil {
		return false, unsupported(m.next, "hold concurrency slots")
	}
	start := time.Now()
	held, err := m.slots.RenewSlot(ctx, req, slot, token)
	ms := Measurement{Name: req.Name, Call: CallRenewSlot, Source: "backend", Outcome: OutcomeRenewed, Duration: time.Since(start), Slot: -1}
	switch {
	case err != nil:
		ms.Source, ms.Outcome = "error", OutcomeError
	case !held:
		ms.Outcome = OutcomeExpired
	}
	m.observe(ctx, ms)
	return held, err
}

// PeekSlot passes the call on and measures it; it moves no units. See
// [ratelimit.SlotHolder].
func (m *Measured) PeekSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit) (ratelimit.Decision, int64, error) {
	if m.slots == nil {
		return ratelimit.Decision{}, 0, unsupported(m.next, "hold concurrency slots")
	}
	start := time.Now()
	d, held, err := m.slots.PeekSlot(ctx, req, slot)
	m.decided(ctx, CallPeekSlot, &req, d, err, time.Since(start), false, true)
	return d, held, err
}

// Peek passes req on and measures the call; it moves no units. See
// [ratelimit.Peeker].
func (m *Measured) Peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if m.peeker == nil {
		return ratelimit.Decision{}, fmt.Errorf("ratelimit: %T cannot peek: %w", m.next, errors.ErrUnsupported)
	}
	start := time.Now()
	d, err := m.peeker.Peek(ctx, req)
	m.decided(ctx, CallPeek, &req, d, err, time.Since(start), false, false)
	return d, err
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
		}
	default:
		ms.Source, ms.Outcome = d.Source.String(), OutcomeLimited
		switch i := d.LimitIndex; {
		case !charges:
		case i == slot:
			ms.Slot = slot
		case i >= 0 && i < len(req.Limits) && i < 32:
			ms.Units, ms.Lines = req.Units(), 1<<i
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

// unsupported is the error of a capability the wrapped limiter lacks.
func unsupported(next ratelimit.Limiter, what string) error {
	return fmt.Errorf("%w: %T cannot %s: %w", ratelimit.ErrInvalidLimit, next, what, errors.ErrUnsupported)
}

var (
	_ ratelimit.Wrapper    = (*Measured)(nil)
	_ ratelimit.Reserver   = (*Measured)(nil)
	_ ratelimit.SlotHolder = (*Measured)(nil)
	_ ratelimit.Peeker     = (*Measured)(nil)
)
