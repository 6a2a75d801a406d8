package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limiter is the backend contract: every call of every rule reaches a
// backend through its three methods, so a limiter that wraps another (a
// guard, metrics, a user's own) sees each call by construction. What a
// backend supports is a value it reports ([Abilities]), never an interface
// found by unwrapping. Implementations are safe for concurrent use;
// runtime/limitertest checks that a backend honours what it reports.
type Limiter interface {
	// Allow decides req and, if every limit admits it, charges its cost to
	// each. The error is non-nil only when no decision could be made (a
	// backend failure, wrapping ErrBackend, or an invalid request); a denied
	// call is a Decision with Allowed false and a nil error.
	Allow(ctx context.Context, req Request) (Decision, error)
	// Do carries out op, any operation of the contract but Allow's (see
	// [OpKind]). A kind the limiter does not support fails with an error
	// wrapping errors.ErrUnsupported (see [Unsupported]).
	Do(ctx context.Context, op Op) (Result, error)
	// Abilities reports what the limiter supports and the configuration
	// it was made with; it must not change.
	Abilities() Abilities
}

// OpKind names an operation of [Limiter.Do]: which fields of [Op] it
// reads and which of [Result] it sets.
type OpKind uint8

// The operations of [Limiter.Do]. Each reads the Op's Request; a limit of
// it is a line, by its index in Request.Limits.
const (
	// OpPlan returns, in Result.Plan, the limiter's fast path for the
	// calls of Request.Rule (see [Plan]); a zero Plan has Allow decide
	// them.
	OpPlan OpKind = iota + 1
	// OpReserve is Allow, also setting Result.At: the time, on the
	// backend's clock, at which an admitted call was charged.
	OpReserve
	// OpAdjust changes the charge of the Request that OpReserve admitted
	// at Op.At by Op.Units without deciding: a refund of -Units units when
	// negative, a charge on top when positive (see [Reservation] for what
	// either does per algorithm). Each line is changed where a decision of
	// the Request keeps its state; a line that counts calls
	// ([Limit.PerCall]) is left as it is. It tells the hook of a failure
	// only. [Reservation.Settle] runs it on a context detached from its
	// caller's cancellation.
	OpAdjust
	// OpPeek sets Result.Decision to the decision Allow would return now,
	// charging nothing (see [Peek]).
	OpPeek
	// OpReset forgets the state of every limit of Request.Name under
	// Request.Key (or the long key whose stand-in Key is), concurrency
	// slots too (see [Reset]).
	OpReset
	// OpTakeSlot decides the Request's rate limits (there may be none) and
	// a slot of Op.Slot under Op.Token, all or nothing, setting
	// Result.Decision and Result.At as OpReserve does. A denial for the
	// slot has LimitIndex len(Request.Limits), RetryAfter the soonest end
	// of a lease and ResetAfter the last. It tells the hook nothing: the
	// rule does. See Concurrency limits at [Reservation].
	OpTakeSlot
	// OpRenewSlot renews the lease of the slot held under Op.Token, and
	// sets Result.Held when it was still held.
	OpRenewSlot
	// OpGiveSlot gives back the slot held under Op.Token, if it is held.
	OpGiveSlot
	// OpPeekSlot sets Result.Decision to what OpTakeSlot would decide now,
	// charging and taking nothing, and Result.Count to the slots held now;
	// it fails wrapping errors.ErrUnsupported when the backend cannot tell.
	OpPeekSlot
	// OpCool records that line Op.Line cools for Op.Wait from now, on the
	// backend's clock: a cooldown that ends later than one recorded
	// replaces it, one that ends sooner changes nothing (see
	// [Rule.Cooldown]).
	OpCool
	// OpCooling sets Result.Line to the line marked [Limit.Cooldown] whose
	// cooldown ends last, and Result.Left to how long it still cools;
	// Line is -1 when none cools now.
	OpCooling
	// OpTurn decides the Request as Allow does when it is the call's turn
	// in the queue of its name and key (see Waiting in the package doc):
	// no call waits and Op.Ticket is 0 (the call holds no place), or
	// Op.Ticket is first. Otherwise it denies the call undecided, with
	// Source [SourceQueue] and RetryAfter the soonest the limits could
	// admit it behind the calls ahead. A denied call whose RetryAfter is
	// within Op.Wait holds a place, which Result.Ticket returns (0 for any
	// other call; an admitted call's place is freed); Result.At is as
	// OpReserve's. A limiter may decline a call it cannot queue (its keys
	// are kept apart) with an error wrapping errors.ErrUnsupported: the
	// call is then decided by Allow, and waits in its process's order.
	OpTurn
	// OpSlotTurn is OpTakeSlot in the call's turn, as OpTurn is Allow's,
	// except that a call behind n others has its turn too while more than
	// n slots are free and its rate limits would admit it behind them. A
	// call denied for want of a slot keeps its place and comes back as
	// [SlotPoll] says.
	OpSlotTurn
	// OpDequeue frees Op.Ticket's place in the Request's queue: its call
	// stopped waiting.
	OpDequeue
	// OpWaiting sets Result.Count to how many calls hold a place in the
	// Request's queue, and Result.Left to how long until the last of them
	// is due back, changing nothing. It declines what OpTurn declines.
	OpWaiting
	// OpCountDenial counts one denial by line Op.Line (-1: an override's)
	// of the calls of Request.Name under Request.Key (bounded, or a digest
	// when the line's key is hashed: [Op.KeyHashed]), so that the fleet's
	// most-denied keys can be listed. [Rule.Check] does it on every denial,
	// so it must be cheap and never block.
	OpCountDenial
	// OpTopDenied sets Result.Denied to the Op.Units most-denied (name,
	// key)s of the last five minutes, most first (see [DeniedKey]); it
	// reads no Request.
	OpTopDenied
	// OpFallback decides the Request in process, as Allow would with the
	// backend's state out of reach, and charges it there, setting
	// Result.Limits to the limits it decided against (the Request's, or
	// what it enforces in their stead, such as one process's share of
	// each), which the decision's LimitIndex indexes. [Rule.Check] asks for
	// it when Allow failed and the rule's error policy is [FailLocal].
	OpFallback
	// OpReserveHeld is OpReserve, except that the units it charges to each
	// SlidingLog limit weigh until Op.Hold past a period after the time it
	// charged them at (what else it charges weighs as OpReserve's does): a
	// lease's charge (see guard.Leases), which covers the calls the lease
	// admits however it ends. Hold is positive and at most a quarter of
	// each SlidingLog limit's period, of which the Request takes 2 units at
	// least (Cost, not PerCall); else it fails with [ErrInvalidLimit].
	OpReserveHeld
	// OpRefundHeld takes back up to Op.Units units that OpReserveHeld
	// charged to the Request at Op.At with Op.Hold, as OpAdjust refunds,
	// except that each SlidingLog limit gives back only units held with
	// Hold, and a held charge keeps 2 units or none (a refund that would
	// leave 1 leaves 2).
	OpRefundHeld
	opKinds // the number of kinds, plus one
)

var opNames = [...]string{
	OpPlan: "plan", OpReserve: "reserve", OpAdjust: "adjust", OpPeek: "peek",
	OpReset: "reset", OpTakeSlot: "take_slot", OpRenewSlot: "renew_slot",
	OpGiveSlot: "give_slot", OpPeekSlot: "peek_slot", OpCool: "cool",
	OpCooling: "cooling", OpTurn: "turn", OpSlotTurn: "slot_turn",
	OpDequeue: "dequeue", OpWaiting: "waiting", OpCountDenial: "count_denial",
	OpTopDenied: "top_denied", OpFallback: "fallback",
	OpReserveHeld: "reserve_held", OpRefundHeld: "refund_held",
}

// String returns the kind's name in snake case, such as "take_slot".
func (k OpKind) String() string {
	if k > 0 && k < opKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one operation of [Limiter.Do]: its Kind says which other fields
// it reads.
type Op struct {
	Kind    OpKind
	Request Request
	// At is when OpReserve (or OpTakeSlot) charged the Request (OpAdjust).
	At time.Time
	// Units is the change of OpAdjust, or how many keys OpTopDenied lists.
	Units int64
	// Line is the limit of OpCool and OpCountDenial.
	Line int
	// Slot and Token are the concurrency limit and the holder's token of
	// the slot operations.
	Slot  Limit
	Token string
	// Ticket is the call's place in its queue (OpTurn, OpSlotTurn,
	// OpDequeue): 0 when it holds none.
	Ticket int64
	// Wait is how long OpCool cools, or how long the call of OpTurn or
	// OpSlotTurn may still wait.
	Wait time.Duration
	// Hold is how long past a period a held charge weighs
	// (OpReserveHeld, OpRefundHeld).
	Hold time.Duration
}

// KeyHashed reports whether the key of op's Line (of every line, for
// -1) is a digest of the caller's key ([Rule.KeyHash] of Request.Rule).
func (op *Op) KeyHashed() bool {
	return op.Request.Rule != nil && hashed(op.Request.Rule.KeyHash, op.Line)
}

// Result is what an operation of [Limiter.Do] returns; its kind (see
// [OpKind]) says which fields it sets.
type Result struct {
	Decision Decision
	// At is when an admitted call was charged, on the backend's clock.
	At time.Time
	// Ticket is the place a call holds in its queue after OpTurn or
	// OpSlotTurn, 0 for none.
	Ticket int64
	// Count is the slots held (OpPeekSlot) or the calls waiting
	// (OpWaiting).
	Count int64
	// Held says OpRenewSlot found the slot still held.
	Held bool
	// Line and Left are the cooling line and how long it still cools
	// (OpCooling), or Left how long until the last waiting call is due
	// back (OpWaiting).
	Line int
	Left time.Duration
	// Limits are the limits OpFallback decided against.
	Limits []Limit
	// Denied are the most-denied keys (OpTopDenied).
	Denied []DeniedKey
	// Plan is the fast path of OpPlan.
	Plan Plan
}

// Plan is a limiter's fast path for the calls of one [Rule] with one key.
// Decide decides a call with key and cost exactly as the limiter's Allow
// decides Request{Name: r.Name, Key: key, Cost: cost, Limits: r.Limits,
// Rule: r}, without a Request; CountDenial counts a denial of such a call
// under key (hashed as [Op.KeyHashed] says) exactly as OpCountDenial
// would, without an Op. Either may be nil: the call then goes through Allow or Do.
// [Rule.Check] asks for a plan once per rule and limiter (OpPlan), and
// uses it only when By is the limiter it was given: so a wrapper that
// passes OpPlan on unchanged still sees every call through its Allow and
// Do, and one that wants the fast path returns a Plan of its own, By
// itself, whose functions call the wrapped plan's.
type Plan struct {
	By          Limiter
	Decide      func(ctx context.Context, key string, cost int64) (Decision, error)
	CountDenial func(key string, hashed bool)
}

// Of reports whether p is a plan of limiter's own: one to use when
// deciding on limiter.
func (p Plan) Of(limiter Limiter) bool {
	return p.By != nil && wordsOf(p.By) == wordsOf(limiter)
}

// Abilities is what a [Limiter] reports it supports, and the
// configuration it was made with.
type Abilities struct {
	// Ops are the operations its Do carries out.
	Ops Ops
	// SharesLines says it decides requests with shared lines
	// ([Request.Shared]): it keeps limit i's state where [Request.Line]
	// says, so that the rules sharing a line share its state. [Rule.Check]
	// refuses a rule with shared lines on a limiter that does not, since
	// another would keep each rule's line apart and admit more than the
	// line allows.
	SharesLines bool
	// Config is the configuration the limiter was made with (overrides,
	// error policy, hook; see [Option]), or nil for none. [Rule.Check]
	// reads its Overrides and ErrorPolicy on every call.
	Config *Config
	// ForGuards is what the limiter offers the guards of package
	// runtime/guard beyond the contract: a value implementing some of
	// guard.Probed, guard.Carrier and guard.Heartbeater, or nil. A wrapper
	// reports it on unchanged, as it reports the rest, so the guards
	// around it find it by construction.
	ForGuards any
}

// Ops is a set of [OpKind]s.
type Ops uint32

// OpsOf returns the set of kinds.
func OpsOf(kinds ...OpKind) Ops {
	var s Ops
	for _, k := range kinds {
		s |= 1 << k
	}
	return s
}

// Has reports whether k is in s.
func (s Ops) Has(k OpKind) bool { return s&(1<<k) != 0 }

// Can reports whether a reports the operation k.
func (a Abilities) Can(k OpKind) bool { return a.Ops.Has(k) }

// Unsupported returns the error of an operation that limiter does not
// carry out: it wraps errors.ErrUnsupported.
func Unsupported(limiter Limiter, k OpKind) error {
	return fmt.Errorf("ratelimit: %T does not support %s: %w", limiter, k, errors.ErrUnsupported)
}

// DeniedKey is one of the most-denied keys that OpTopDenied lists.
// Counts are those of a bounded summary (Space-Saving) per minute over
// the last five minutes: a listed count exceeds the key's true count by
// at most its Error, and a key denied more than a 1/256th of a minute's
// denials is always listed. The memory limiter counts the denials of its
// process; the Redis limiter merges each process's counts in Redis.
type DeniedKey struct {
	Name string
	// Key is the key's redacted form ([Request.RedactedKey]).
	Key string
	// Kept is the key as the limiter keeps it (bounded, or a digest):
	// what to ask the limiter about it. Show Key, never Kept.
	Kept string
	// Denials counts its denials; it exceeds the true count by at most
	// Error.
	Denials, Error int64
}
