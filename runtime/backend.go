package ratelimit

import (
	"context"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"
)

// The backend contract: a backend is a [Limiter], and offers each further
// capability by implementing its interface. [Rule] and the functions of
// this package find a capability with [As]: on the limiter they are given,
// else, when it is a [Wrapper], on the limiter it wraps, and so on. So a
// wrapper sees every call whose capability it implements, and passes on
// the others through Unwrap; a wrapper that implements a capability
// forwards to the wrapped limiter's (found with As) itself.
//
//	capability      used by
//	Limiter         Rule.Check (every backend)
//	RuleDecider     Rule.Check of one key against a rule's own limits, when the limiter itself offers it
//	Peeker          Peek, Rule.Peek
//	Resetter        Reset
//	Reserver        Rule.Reserve, Reservation.Settle
//	SlotHolder      Rule.Reserve of a rule with a concurrency limit, Peek of one
//	Configured      overrides, error policy and hook of Rule's calls
//	Fallback        the FailLocal error policy
//	LineSharer      Rule.Check and Rule.Peek of a rule with shared lines (Rule.Shared)
//	DenialCounter   the fleet's top denied keys (httplimit's admin view)
//	Cooler          Rule.Cooldown, and Rule.Check, Reserve and Peek of a rule with a cooldown line (Limit.Cooldown)
//	Queuer          Rule.Check and Rule.Reserve of a rule with Wait: its waiting calls, admitted in the order they began to wait
//
// runtime/limitertest checks that a backend honours what it offers.

// RuleDecider is a [Limiter] that decides the calls of a [Rule] without
// a [Request]: the in-process limiter's fast path, which any backend may
// offer. [Rule.Check] uses it for a call with one key against the rule's
// own limits (no override), on the limiter it is given, never through a
// [Wrapper], since it stands for Allow; it asks once per rule and limiter,
// and keeps the function with the rule.
type RuleDecider interface {
	Limiter
	// DecideRule returns a function that decides a call of r with key and
	// cost exactly as Allow decides Request{Name: r.Name, Key: key, Cost:
	// cost, Limits: r.Limits, Rule: r}, or nil to have Allow decide them.
	DecideRule(r *Rule) func(ctx context.Context, key string, cost int64) (Decision, error)
}

// LineSharer is a [Limiter] that decides requests with shared lines
// ([Request.Shared]): it keeps limit i's state where [Request.Line] says,
// so that the rules sharing a line share its state, and decides every
// limit of the request all or nothing, as for any request with a key per
// limit. [Rule.Check] refuses to decide a rule with shared lines on a
// limiter that does not offer it (found with [As]), since another would
// keep each rule's line apart and admit more than the line allows.
type LineSharer interface {
	Limiter
	// SharesLines marks the capability; it does nothing.
	SharesLines()
}

// Queuer is a [Limiter] that queues the waiting calls of each name and key
// (or keys, for a key per limit) in its state, so that every process
// sharing it admits them in the order they began to wait. [Rule.Check] of
// a rule with Wait decides each of its calls with AllowInTurn when the
// limiter offers it (see [As]), and sleeps between tries for the
// RetryAfter it is told. A place is held while its holder comes back
// within [QueueGrace] of the retry it was told; a holder that stays away
// longer (its process died) loses it, and its queue moves on.
type Queuer interface {
	Limiter
	// AllowInTurn decides req as Allow does when it is the call's turn: no
	// call waits on req's name and key and ticket is 0 (the call holds no
	// place), or ticket is first in the queue. Otherwise it denies the
	// call without deciding it, with Source [SourceQueue] and RetryAfter
	// the soonest the limits could admit it once the calls ahead of it
	// took a unit each. A denied call whose RetryAfter is within wait is
	// given a place (its ticket: when it began to wait, in µs on the
	// backend's clock, a new one at the end of the queue when it held none
	// or lost its place), which it returns as held; any other call gets
	// held 0, and an admitted call's place is freed. at is when an
	// admitted call was charged, as [Reserver.Reserve] tells it, for a
	// backend that offers Reserver.
	// A Queuer may decline a call it cannot queue (its keys are kept
	// apart) with an error wrapping errors.ErrUnsupported: Check then
	// decides it with Allow, and it waits in its process's order.
	AllowInTurn(ctx context.Context, req Request, ticket int64, wait time.Duration) (d Decision, held int64, at time.Time, err error)
	// ReserveSlotInTurn is [SlotHolder.ReserveSlot] in the call's turn,
	// as AllowInTurn decides Allow's, except that a call behind n others
	// has its turn too while more than n slots are free and its rate
	// limits would admit it behind them (each call ahead can still take
	// one). A call denied for want of a slot keeps its place and comes
	// back as [SlotPoll] says (the RetryAfter of a decided denial is the
	// soonest lease's end, a bound). A Queuer that holds no slots fails
	// with an error wrapping errors.ErrUnsupported.
	ReserveSlotInTurn(ctx context.Context, req Request, slot Limit, token string, ticket int64, wait time.Duration) (d Decision, held int64, at time.Time, err error)
	// Dequeue frees ticket's place in req's queue: its call stopped waiting.
	Dequeue(ctx context.Context, req Request, ticket int64) error
	// Waiting returns how many calls hold a place in req's queue now and
	// how long until the last of them is due back (0 when that is past),
	// changing nothing: [Rule.Peek] tells from them what a new call would
	// be told. It declines the calls AllowInTurn declines, as it does.
	Waiting(ctx context.Context, req Request) (n int, due time.Duration, err error)
}

// DenialCounter is a [Limiter] that counts the calls its rules deny, per
// name and key, for every process that shares its state, so that any
// process can list the fleet's most-denied keys (httplimit's admin view
// does): the memory limiter counts those of its process; the Redis
// limiter merges each process's counts into a small summary in Redis.
// Counts are those of a bounded summary (Space-Saving) per minute over
// the last five minutes: a listed count exceeds the key's true count by
// at most its Error, and a key denied more than a 1/256th of a minute's
// denials is always listed.
type DenialCounter interface {
	Limiter
	// CountDenial counts one denial by a limit keyed by key (as the
	// limiter keeps it: bounded) of the rule called name; hashed says key
	// is a digest of the caller's key ([Rule.KeyHash]). [Rule.Check] calls
	// it on every denial, so it must be cheap and never block.
	CountDenial(name, key string, hashed bool)
	// TopDenied returns the n most-denied (name, key)s of the last five
	// minutes, most first, each key in its redacted form
	// ([Request.RedactedKey]).
	TopDenied(ctx context.Context, n int) ([]DeniedKey, error)
}

// DeniedKey is one of [DenialCounter.TopDenied]'s most-denied keys.
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

// Reserver is a [Limiter] whose charges can be changed once made, as
// [Rule.Reserve] and [Reservation.Settle] need.
type Reserver interface {
	Limiter
	// Reserve is Allow, also returning the time, on the backend's clock,
	// at which an admitted call was charged.
	Reserve(ctx context.Context, req Request) (Decision, time.Time, error)
	// Adjust changes the charge of req, which Reserve admitted at the time
	// at, by delta units without deciding: a refund of -delta units when
	// delta is negative, a charge on top when it is positive (see
	// [Reservation] for what either does per algorithm). Each limit is
	// changed where a decision of req keeps its state: under its own key
	// when req has a key per limit (Keys), a shared line under its own
	// name ([Request.Line]); a limit that counts calls ([Limit.PerCall])
	// is left as it is. It tells the hook of a failure only (Failed), as
	// Allow does. [Reservation.Settle] calls it on a context detached from
	// its caller's cancellation.
	Adjust(ctx context.Context, req Request, at time.Time, delta int64) error
}

// SlotHolder is a [Limiter] that holds concurrency slots, as
// [Rule.Reserve] of a rule with a concurrency limit needs (see
// Concurrency limits at [Reservation]). A slot is held under a token that
// no other call holds; its lease ends at slot's lease after it was taken
// or last renewed.
type SlotHolder interface {
	Limiter
	// ReserveSlot decides req's rate limits (there may be none) and a slot
	// of slot under token, all or nothing: it charges req and takes the
	// slot only if both admit the call, and returns when it did (as
	// [Reserver.Reserve] does, for a later Adjust of the rate limits). A
	// denial for the slot has LimitIndex len(req.Limits), RetryAfter the
	// soonest end of a lease and ResetAfter the last. It tells the hook
	// nothing: the rule does.
	ReserveSlot(ctx context.Context, req Request, slot Limit, token string) (Decision, time.Time, error)
	// ReleaseSlot gives back the slot held under token, if it is held.
	ReleaseSlot(ctx context.Context, req Request, slot Limit, token string) error
	// RenewSlot renews the lease of the slot held under token, and
	// reports whether it was still held.
	RenewSlot(ctx context.Context, req Request, slot Limit, token string) (bool, error)
	// PeekSlot returns the decision ReserveSlot would return now, charging
	// and taking nothing, and how many slots are held now; an error
	// wrapping errors.ErrUnsupported when the backend cannot tell.
	PeekSlot(ctx context.Context, req Request, slot Limit) (Decision, int64, error)
}

// InFlightHook is a [Hook] that counts the calls in flight: it is told of
// each concurrency slot a call takes (delta 1) and gives back (-1), as
// limitmetrics.Metrics counts them.
type InFlightHook interface {
	Hook
	InFlight(ctx context.Context, name string, delta int)
}

// As returns the capability T that limiter offers: limiter itself when it
// is a T, else, when it is a [Wrapper], what the limiter it wraps offers,
// and so on; ok is false when none in the chain is a T.
func As[T any](limiter Limiter) (capability T, ok bool) {
	for limiter != nil {
		if c, ok := limiter.(T); ok {
			return c, true
		}
		w, ok := limiter.(Wrapper)
		if !ok {
			break
		}
		limiter = w.Unwrap()
	}
	return capability, false
}

// ruleFast is the function of a [RuleDecider] that decides a rule's
// calls on limiter, kept with the rule, and what check asks of every call
// before it takes that path.
type ruleFast struct {
	limiter limiterWords // a pointer's: the words tell it apart
	limits  []Limit      // the rule's limits it decides
	decide  func(ctx context.Context, key string, cost int64) (Decision, error)
	direct  bool    // decide is not nil, and the limits hold no concurrency limit (see Rule.Reserve) and no cooldown
	config  *Config // limiter's, whose Overrides may replace the limits
}

// limiterWords are the two words of a Limiter: its type's and its value's.
// For a limiter that is a pointer, they are equal exactly when the
// limiters are, and comparing them costs no call into the runtime.
type limiterWords struct{ typ, value unsafe.Pointer }

// wordsOf returns limiter's words.
func wordsOf(limiter Limiter) limiterWords { return *(*limiterWords)(unsafe.Pointer(&limiter)) }

// fastDecide returns the function that decides r's calls on limiter,
// with what check must know of it (its decide is nil when the limiter is
// no RuleDecider or declined to make one), or nil when r has no limits:
// the one kept with r when it was made for limiter, else a new one.
func (r *Rule) fastDecide(limiter Limiter) *ruleFast {
	if f := (*ruleFast)(atomic.LoadPointer(&r.fast)); f != nil && f.limiter == wordsOf(limiter) && f.covers(r.Limits) {
		return f
	}
	return r.makeFast(limiter)
}

// makeFast is fastDecide without a kept function: it asks limiter for
// one, and keeps it for the next calls when limiter is a pointer (as a
// RuleDecider should be: another is asked on every call).
func (r *Rule) makeFast(limiter Limiter) *ruleFast {
	rd, ok := limiter.(RuleDecider)
	kept := reflect.TypeOf(limiter).Kind() == reflect.Pointer
	if len(r.Limits) == 0 || !ok && !kept {
		return nil
	}
	// A nil decide is kept too: a RuleDecider is asked once per rule, and
	// another limiter is not asked again whether it is one.
	f := &ruleFast{limiter: wordsOf(limiter), limits: r.Limits, config: configOf(limiter)}
	if ok {
		f.decide = rd.DecideRule(r)
	}
	f.direct = f.decide != nil && !hasSlot(r.Limits) && !cools(r.Limits)
	if kept {
		atomic.StorePointer(&r.fast, unsafe.Pointer(f))
	}
	return f
}

// covers reports whether f was made for limits, a rule's Limits.
func (f *ruleFast) covers(limits []Limit) bool {
	return len(f.limits) == len(limits) && &f.limits[0] == &limits[0]
}

// configOf returns the Config of limiter, found with [As]; nil when no
// limiter of the chain is [Configured].
func configOf(limiter Limiter) *Config {
	if c, ok := limiter.(Configured); ok { // the common case, inlined
		return c.Config()
	}
	return wrappedConfigOf(limiter)
}

// wrappedConfigOf is configOf of a limiter that is not Configured itself.
func wrappedConfigOf(limiter Limiter) *Config {
	if c, ok := As[Configured](limiter); ok {
		return c.Config()
	}
	return nil
}

// micros returns t in µs since the Unix epoch, as the algorithms count
// time.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros returns the time us µs after the Unix epoch.
func fromMicros(us int64) time.Time { return time.UnixMicro(us) }
