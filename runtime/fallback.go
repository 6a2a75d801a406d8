package ratelimit

import (
	"context"
	"errors"
)

// Fallback is a [Limiter] with an in-process stand-in for its backend:
// [Rule.Check] asks it to decide a call of a [FailLocal] rule that Allow
// could not decide.
type Fallback interface {
	Limiter
	// AllowLocal decides req in process, as Allow would with the backend's
	// state out of reach, and charges it there; an error means it cannot
	// decide req either.
	AllowLocal(ctx context.Context, req Request) (Decision, error)
}

// fallback returns the decision of limiter's [Fallback] for req, which
// limiter could not decide because of err, when r's error policy is
// [FailLocal]; otherwise, or when the fallback cannot decide req, err. It
// takes req by value, so that only failed calls move a request to the heap.
func (r *Rule) fallback(ctx context.Context, limiter Limiter, req Request, err error) (Decision, error) {
	if ctx.Err() != nil || !errors.Is(err, ErrBackend) || r.policy(limiter) != FailLocal {
		return Decision{}, err
	}
	local, ok := innermost(limiter).(Fallback)
	if !ok {
		return Decision{}, err
	}
	d, lerr := local.AllowLocal(ctx, req)
	if lerr != nil {
		return Decision{}, err
	}
	return d, nil
}
