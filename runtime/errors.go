package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrLimited is matched by errors.Is for every [*LimitError]: the call
	// was denied because a limit was reached.
	ErrLimited = errors.New("ratelimit: rate limit exceeded")
	// ErrBackend is wrapped by every error that means no decision could be
	// made because the backend (Redis) failed.
	ErrBackend = errors.New("ratelimit: backend failure")
	// ErrInvalidLimit is wrapped by errors for requests that can never be
	// decided: a non-positive period or threshold, an unknown algorithm, or
	// a cost no limit can ever admit ([*CostError]).
	ErrInvalidLimit = errors.New("ratelimit: invalid limit")
	// ErrCircuitOpen is wrapped by the [*BackendError] a limiter returns
	// without asking its backend, because its last calls failed and its
	// circuit breaker is open. errors.Is(err, ErrBackend) holds too, so the
	// rule's [ErrorPolicy] applies at once.
	ErrCircuitOpen = errors.New("ratelimit: circuit open after repeated backend failures")
	// ErrBusy is wrapped, beside ErrBackend, by the error of a call that
	// the limiter's own client could not send in time because all its
	// connections were busy (waiting for a pooled connection longer than
	// the pool timeout): the backend is up, the limiter is saturated. A
	// circuit breaker counts it neither way, and [Rule.Check] denies the
	// call with a [*LimitError] of Source [SourceBusy] and RetryAfter
	// [BusyRetry] whatever the error policy, so the backend stays the judge
	// of every admission and load never lifts a limit.
	ErrBusy = errors.New("ratelimit: backend busy")
	// ErrEmptyKey is wrapped by the error a decorator returns, under
	// emptykey=deny, when a call's key is "" ([*KeyError]).
	ErrEmptyKey = errors.New("ratelimit: key is empty")
	// ErrNilKey is wrapped by the error a decorator returns when the value
	// its key= directive reads sits behind a nil pointer ([*KeyError]).
	ErrNilKey = errors.New("ratelimit: key is nil")
)

// LimitError reports a denied call. errors.Is(err, ErrLimited) holds for it.
type LimitError struct {
	// Name is the limit identity of the call.
	Name string
	// Key is the per-call key, empty when the limit is not keyed. A key
	// whose escaped form (as in its Redis key: '%', '{', '}', ':' and
	// control bytes percent-encoded) is longer than 64 bytes is replaced
	// by its stand-in, at most 97 bytes: its first escaped bytes (at most
	// 32), ':' and the hex SHA-256 of the whole key, such as
	// "Bearer eyJhbGciOiJIUzI1NiIsInR5c:9f86d081…", as it appears in its
	// Redis key. A key kept as it is is never that long, nor holds a ':'
	// in its Redis key, so no stand-in equals one.
	Key string
	// KeyExpr is the key expression of the limit that denied the call, as
	// its directive wrote it (see [Rule.KeyExprs]), such as "user", when
	// the rule gives each limit its own key; Key is then that limit's key,
	// empty for a limit that counts every call as one. KeyExpr is empty
	// when every limit shares the call's one key.
	KeyExpr string
	// Limit is the limit that denied the call.
	Limit Limit
	// Remaining is how many units that limit admits now (less than the cost).
	Remaining int64
	// RetryAfter is how long to wait before the call would be admitted if
	// nobody else called in between.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit is fully available again.
	ResetAfter time.Duration
	// Source says what denied the call: the backend (the limit is used
	// up), its deny cache, its fallback, an override, a cooldown, a queue,
	// or [SourceBusy] (the call was shed: the limiter was saturated, or
	// its processes were rejoining the backend after an outage).
	Source Source
	// Line is the name of the shared line that denied the call (see
	// [Rule.Shared]), such as "example.com/svc#global"; empty when the
	// method's own limit did.
	Line string
}

// Cause says why the call was denied, in a word callers can switch on:
// "blocked" (an override blocks the key), "cooldown" (an upstream asked
// its line to pause, until RetryAfter), "concurrency" (no slot free: its
// most calls are in flight), "queue" (it waits its turn behind earlier
// calls), "shed" (undecided: see [SourceBusy]), or "limit" (the limit,
// or the shared Line, is used up).
func (e *LimitError) Cause() string {
	switch {
	case e.Source == SourceBusy:
		return "shed"
	case e.Limit.Algorithm == Block:
		return "blocked"
	case e.Source == SourceCooldown:
		return "cooldown"
	case isConcurrency(e.Limit):
		return "concurrency"
	case e.Source == SourceQueue:
		return "queue"
	}
	return "limit"
}

// Error describes the denial, including when to retry. It names the key
// of a call with one key (bounded, as Key holds it), and for a limit of a
// rule with a key per limit its key expression instead, never the key's
// value: the key of another limit than the caller's own (a tenant's, say)
// is not the caller's to see.
func (e *LimitError) Error() string {
	key := ""
	switch {
	case e.KeyExpr != "":
		key = fmt.Sprintf(" (key=%s)", e.KeyExpr)
	case e.Key != "":
		key = fmt.Sprintf(" key %q", e.Key)
	}
	line := ""
	if e.Line != "" {
		line = " (shared line " + e.Line + ")"
	}
	switch e.Cause() {
	case "shed":
		return fmt.Sprintf("ratelimit: %s%s was shed undecided: the limiter is saturated or rejoining its backend; retry after %s", e.Name, key, e.RetryAfter)
	case "blocked":
		return fmt.Sprintf("ratelimit: %s%s is blocked by an override; retry after %s", e.Name, key, e.RetryAfter)
	case "cooldown":
		return fmt.Sprintf("ratelimit: %s%s%s is cooling down: an upstream asked for a pause; retry after %s", e.Name, key, line, e.RetryAfter)
	case "concurrency":
		return fmt.Sprintf("ratelimit: %s%s has %d calls in flight, its most; retry after %s at the latest", e.Name, key, e.Limit.Threshold, e.RetryAfter)
	case "queue":
		return fmt.Sprintf("ratelimit: %s%s waits its turn behind earlier calls; retry after %s", e.Name, key, e.RetryAfter)
	}
	if e.Line != "" {
		return fmt.Sprintf("ratelimit: %s: shared line %s%s exceeded %d per %s; retry after %s",
			e.Name, e.Line, key, e.Limit.Threshold, e.Limit.per(), e.RetryAfter)
	}
	if e.KeyExpr != "" {
		return fmt.Sprintf("ratelimit: %s exceeded %d per %s%s; retry after %s",
			e.Name, e.Limit.Threshold, e.Limit.per(), key, e.RetryAfter)
	}
	return fmt.Sprintf("ratelimit: %s%s exceeded %d per %s; retry after %s",
		e.Name, key, e.Limit.Threshold, e.Limit.per(), e.RetryAfter)
}

// Is reports whether target is ErrLimited.
func (e *LimitError) Is(target error) bool { return target == ErrLimited }

// BackendError reports that the backend could not decide a call.
// errors.Is(err, ErrBackend) holds for it, and it unwraps to the cause.
type BackendError struct {
	// Name is the limit identity of the call.
	Name string
	// Err is the cause, such as a network error from the Redis client.
	Err error
}

// Error describes the failure and its cause.
func (e *BackendError) Error() string {
	return fmt.Sprintf("ratelimit: %s: backend failure: %v", e.Name, e.Err)
}

// Is reports whether target is ErrBackend.
func (e *BackendError) Is(target error) bool { return target == ErrBackend }

// Unwrap returns the cause.
func (e *BackendError) Unwrap() error { return e.Err }

// CostError reports a call whose cost is larger than a limit can ever
// admit, so no retry time would be honest, or whose cost is negative (as
// a cost= parameter can be). It wraps ErrInvalidLimit.
type CostError struct {
	// Name is the limit identity of the call.
	Name string
	// Cost is the call's cost.
	Cost int64
	// Limit is the limit that can never admit it (the first of the rule's
	// limits for a negative cost).
	Limit Limit
}

// Error describes the impossible cost.
func (e *CostError) Error() string {
	if e.Cost < 0 {
		return fmt.Sprintf("ratelimit: %s: cost %d is negative", e.Name, e.Cost)
	}
	return fmt.Sprintf("ratelimit: %s: cost %d can never be admitted by limit %d per %s",
		e.Name, e.Cost, e.Limit.Threshold, e.Limit.per())
}

// Is reports whether target is ErrInvalidLimit.
func (e *CostError) Is(target error) bool { return target == ErrInvalidLimit }

// FieldError reports a field of overrides (see [ParseOverrides]) that
// could not be used, and why; it unwraps to the reason.
type FieldError struct {
	// Field is the field's name, such as "svc.Store.Get|key=acme".
	Field string
	// Err is why it could not be used; it wraps [ErrInvalidLimit].
	Err error
}

// Error names the field and the reason.
func (e *FieldError) Error() string { return fmt.Sprintf("%q: %v", e.Field, e.Err) }

// Unwrap returns the reason.
func (e *FieldError) Unwrap() error { return e.Err }
