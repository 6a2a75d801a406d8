package ratelimit

import (
	"context"
	"errors"
	"fmt"
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
}

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
		Limit:      r.Limits[d.Denied],
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
