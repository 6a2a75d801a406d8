package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNilKey is wrapped by the error a decorator returns when the value its
// key= directive reads sits behind a nil pointer.
var ErrNilKey = errors.New("ratelimit: key is nil")

// Rule is the compiled form of the //ratelimit: directives of one method.
// Generated code keeps one per limited method in a package variable and
// calls [Rule.Check] before delegating.
type Rule struct {
	// Name is the limit identity; see [Request.Name].
	Name string
	// Limits must all admit a call.
	Limits []Limit
	// Wait is how long a denied call may wait to be admitted before
	// Check gives up; zero means no waiting.
	Wait time.Duration
	// OnError says what Check does when the limiter fails; the zero value
	// means the limiter's default.
	OnError ErrorPolicy
	// Shadow makes Check report would-be denials to the limiter's hook
	// without ever denying a call.
	Shadow bool
}

// ErrorPolicy says what to do with a call when the limiter cannot decide it.
type ErrorPolicy string

// The error policies. The zero value means the limiter's default.
const (
	// FailOpen lets the call through and reports the error to the hook.
	FailOpen ErrorPolicy = "allow"
	// FailClosed denies the call with an error wrapping ErrBackend.
	FailClosed ErrorPolicy = "deny"
)

// Check asks limiter whether a call with the given per-call key and cost
// may proceed. It returns nil when the call was admitted, a [*LimitError]
// when it was denied, and the limiter's error (wrapping [ErrBackend] for a
// backend failure) when no decision could be made.
func (r *Rule) Check(ctx context.Context, limiter Limiter, key string, cost int64) error {
	d, err := limiter.Allow(ctx, Request{Name: r.Name, Key: key, Cost: cost, Limits: r.Limits})
	if err != nil {
		return err
	}
	if d.Allowed {
		return nil
	}
	return &LimitError{
		Name:       r.Name,
		Key:        key,
		Limit:      r.Limits[d.Limit],
		Remaining:  d.Remaining,
		RetryAfter: d.RetryAfter,
		ResetAfter: d.ResetAfter,
	}
}

// NilKeyError returns the error a decorator of the method named name
// returns when the key expression path (such as "req.User") is a nil
// pointer. It wraps [ErrNilKey].
func NilKeyError(name, path string) error {
	return fmt.Errorf("%w: %s: %s is nil", ErrNilKey, name, path)
}
