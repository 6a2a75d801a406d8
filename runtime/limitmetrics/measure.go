package limitmetrics

import (
	"context"
	"math/bits"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Call names the call of a limiter that a [Measurement] measured: Allow,
// or an operation of its Do (see [ratelimit.OpKind]).
type Call string

// The calls a [Measured] limiter measures: every call of the backend
// contract that decides, charges, holds or gives back units.
const (
	CallAllow       Call = "allow"        // Allow: a plain check (Rule.Check)
	CallReserve     Call = "reserve"      // OpReserve: a settle= rule's charge (Rule.Reserve)
	CallAdjust      Call = "adjust"       // OpAdjust: its settlement or refund (Reservation.Settle, Refund)
	CallReserveSlot Call = "reserve_slot" // OpTakeSlot: a concurrency= rule's slot and rate limits
	CallReleaseSlot Call = "release_slot" // OpGiveSlot: the slot given back
	CallRenewSlot   Call = "renew_slot"   // OpRenewSlot: its lease renewed
	CallPeek        Call = "peek"         // OpPeek: a look that charges nothing
	CallPeekSlot    Call = "peek_slot"    // OpPeekSlot: a look at the slots
	CallTurn        Call = "turn"         // OpTurn: a waiting call's try in its turn (wait=)
	CallSlotTurn    Call = "slot_turn"    // OpSlotTurn: a waiting call's try for a slot in its turn
	CallCool        Call = "cool"         // OpCool: a cooldown recorded (Rule.Cooldown)
	CallFallback    Call = "fallback"     // OpFallback: a decision in process while the backend failed
	CallReset       Call = "reset"        // OpReset: a key's state forgotten
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
	OutcomeCooled    Outcome = "cooled"    // a cooldown recorded
	OutcomeReset     Outcome = "reset"     // a key's state forgotten
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
	// Calls has bit i set for each line of Lines that counts calls
	// ([ratelimit.Limit.PerCall]): it moved 1 unit (the call), not Units.
	Calls uint32
	// Slot is the line of the concurrency slot taken, denied or given
	// back (one unit: a slot), or -1.
	Slot int
}

// EachLine calls f with each line the call moved units on, in order, and
// the units: Units for each of Lines (1 for one of Calls), 1 for the Slot.
func (m *Measurement) EachLine(f func(line int, units int64)) {
	for l := m.Lines; l != 0; l &= l - 1 {
		i := bits.TrailingZeros32(l)
		if m.Calls&(1<<i) != 0 {
			f(i, 1)
		} else {
			f(i, m.Units)
		}
	}
	if m.Slot >= 0 {
		f(m.Slot, 1)
	}
}

// Measured is a [ratelimit.Limiter] that wraps another and measures every
// call it passes on (see [Call]), giving each [Measurement] to an
// observer, such as the Prometheus and OpenTelemetry adapters' record
// functions. It reports the wrapped limiter's abilities, and passes on
// the operations it does not measure (cooldowns asked, queue places
// freed or counted, denials counted), so wrapping changes no decision.
// Each try of a waiting call is one call; the time it sleeps between
// tries is not measured. The wrapped limiter's fast path ([ratelimit.Plan])
// is kept, measured as Allow.
type Measured struct {
	next    ratelimit.Limiter
	observe func(context.Context, Measurement)
	ops     ratelimit.Handlers
}

// Measure returns next wrapped in a [Measured] limiter that gives the
// measurement of each call to observe, on the caller's goroutine, after
// the call.
func Measure(next ratelimit.Limiter, observe func(context.Context, Measurement)) *Measured {
	m := &Measured{next: next, observe: observe}
	m.ops = ratelimit.Handlers{
		Next: next, Plan: m.plan, Reserve: m.reserve, Adjust: m.adjust, Peek: m.peek,
		Reset: m.reset, TakeSlot: m.takeSlot, RenewSlot: m.renewSlot, GiveSlot: m.giveSlot,
		PeekSlot: m.peekSlot, Cool: m.cool, Turn: m.turn, SlotTurn: m.slotTurn, Fallback: m.fallback,
	}
	return m
}

// Unwrap returns the wrapped limiter.
func (m *Measured) Unwrap() ratelimit.Limiter { return m.next }

// Abilities reports the wrapped limiter's. See [ratelimit.Limiter].
func (m *Measured) Abilities() ratelimit.Abilities { return m.next.Abilities() }

// Allow passes req on and measures the call. See [ratelimit.Limiter].
func (m *Measured) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	start := time.Now()
	d, err := m.next.Allow(ctx, req)
	m.decided(ctx, CallAllow, &req, d, err, time.Since(start), true, false)
	return d, err
}

// Do passes op on and measures it, when it decides, charges, holds or
// gives back units. See [ratelimit.Limiter].
func (m *Measured) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	if !m.next.Abilities().Can(op.Kind) {
		return ratelimit.Result{}, ratelimit.Unsupported(m.next, op.Kind)
	}
	return m.ops.Do(ctx, m, &op)
}

// passOn passes op on to the wrapped limiter.
func (m *Measured) passOn(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return m.next.Do(ctx, op)
}

// plan returns the wrapped limiter's plan for r, measured: a Plan of m's.
// Its denials are counted by the wrapped plan's CountDenial, as Do would
// pass OpCountDenial on.
func (m *Measured) plan(r *ratelimit.Rule) ratelimit.Plan {
	res, err := m.passOn(context.Background(), ratelimit.Op{Kind: ratelimit.OpPlan, Request: ratelimit.Request{Name: r.Name, Limits: r.Limits, Rule: r}})
	if err != nil || !res.Plan.Of(m.next) {
		return ratelimit.Plan{}
	}
	p := ratelimit.Plan{By: m, CountDenial: res.Plan.CountDenial}
	if inner := res.Plan.Decide; inner != nil {
		p.Decide = func(ctx context.Context, key string, cost int64) (ratelimit.Decision, error) {
			start := time.Now()
			d, err := inner(ctx, key, cost)
			req := ratelimit.Request{Name: r.Name, Key: key, Cost: cost, Limits: r.Limits, Rule: r}
			m.decided(ctx, CallAllow, &req, d, err, time.Since(start), true, false)
			return d, err
		}
	}
	return p
}

// reserve is OpReserve, measured.
func (m *Measured) reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	start := time.Now()
	res, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpReserve, Request: req})
	m.decided(ctx, CallReserve, &req, res.Decision, err, time.Since(start), true, false)
	return res.Decision, res.At, err
}

// adjust is OpAdjust, measured: the units refunded or added on each line
// it changes (not those that count calls, which it leaves as they are).
func (m *Measured) adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	start := time.Now()
	_, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpAdjust, Request: req, At: at, Units: delta})
	ms := Measurement{Name: req.Name, Call: CallAdjust, Source: "backend", Duration: time.Since(start), Slot: -1}
	switch {
	case err != nil:
		ms.Source, ms.Outcome = "error", OutcomeError
	case delta < 0:
		ms.Outcome, ms.Units, ms.Lines = OutcomeRefunded, -delta, costLines(req.Limits)
	case delta > 0:
		ms.Outcome, ms.Units, ms.Lines = OutcomeAdded, delta, costLines(req.Limits)
	default:
		ms.Outcome = OutcomeUnchanged
	}
	m.observe(ctx, ms)
	return err
}

// takeSlot is OpTakeSlot, measured: an admission moves the call's units
// on each rate limit and takes a slot, the line after them.
func (m *Measured) takeSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	start := time.Now()
	res, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpTakeSlot, Request: req, Slot: slot, Token: token})
	m.decided(ctx, CallReserveSlot, &req, res.Decision, err, time.Since(start), true, true)
	return res.Decision, res.At, err
}

// giveSlot is OpGiveSlot, measured.
func (m *Measured) giveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) error {
	start := time.Now()
	_, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpGiveSlot, Request: req, Slot: slot, Token: token})
	ms := Measurement{Name: req.Name, Call: CallReleaseSlot, Source: "backend", Outcome: OutcomeReleased, Duration: time.Since(start), Slot: len(req.Limits)}
	if err != nil {
		ms.Source, ms.Outcome, ms.Slot = "error", OutcomeError, -1
	}
	m.observe(ctx, ms)
	return err
}

// renewSlot is OpRenewSlot, measured.
func (m *Measured) renewSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (bool, error) {
	start := time.Now()
	res, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpRenewSlot, Request: req, Slot: slot, Token: token})
	ms := Measurement{Name: req.Name, Call: CallRenewSlot, Source: "backend", Outcome: OutcomeRenewed, Duration: time.Since(start), Slot: -1}
	switch {
	case err != nil:
		ms.Source, ms.Outcome = "error", OutcomeError
	case !res.Held:
		ms.Outcome = OutcomeExpired
	}
	m.observe(ctx, ms)
	return res.Held, err
}

// peekSlot is OpPeekSlot, measured; it moves no units.
func (m *Measured) peekSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit) (ratelimit.Decision, int64, error) {
	start := time.Now()
	res, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpPeekSlot, Request: req, Slot: slot})
	m.decided(ctx, CallPeekSlot, &req, res.Decision, err, time.Since(start), false, true)
	return res.Decision, res.Count, err
}

// peek is OpPeek, measured; it moves no units.
func (m *Measured) peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	start := time.Now()
	res, err := m.passOn(ctx, ratelimit.Op{Kind: ratelimit.OpPeek, Request: req})
	m.decided(ctx, CallPeek, &req, res.Decision, err, time.Since(start), false, false)
	return res.Decision, err
}
