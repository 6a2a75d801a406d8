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
	// decide req either. It returns the limits it decided against, which
	// the decision's LimitIndex indexes: req.Limits, or what it enforces
	// in their stead (such as one process's share of each), so that a
	// denied caller is told the limit that denied it.
	AllowLocal(ctx context.Context, req Request) (Decision, []Limit, error)
}

// fallback returns the decision of limiter's [Fallback] for req, which
// limiter could not decide because of err, and the limits it enforced,
// when r's error policy is [FailLocal]; a call shed because the limiter
// was saturated ([ErrBusy]) is denied instead, whatever the policy.
// Otherwise, or when the fallback cannot decide req, it returns err. It
// takes req by value, so that only failed calls move a request to the
// heap.
func (r *Rule) fallback(ctx context.Context, limiter Limiter, req Request, err error) (Decision, []Limit, error) {
	if ctx.Err() == nil && errors.Is(err, ErrBusy) {
		return shed(), req.Limits, nil
	}
	if ctx.Err() != nil || !errors.Is(err, ErrBackend) || r.policy(limiter) != FailLocal {
		return Decision{}, nil, err
	}
	local, ok := As[Fallback](limiter)
	if !ok {
		return Decision{}, nil, err
	}
	d, limits, lerr := local.AllowLocal(ctx, req)
	if lerr != nil {
		return Decision{}, nil, err
	}
	if len(limits) != len(req.Limits) {
		limits = req.Limits
	}
	return d, limits, nil
}

// shed returns the denial of a call shed undecided because the limiter was
// saturated ([ErrBusy]).
func shed() Decision {
	return Decision{RetryAfter: BusyRetry, Source: SourceBusy}
}

// shedIfBusy returns the denial of a call shed because the limiter was
// saturated when err says so ([ErrBusy]), else d and err.
func shedIfBusy(ctx context.Context, d Decision, err error) (Decision, error) {
	if err != nil && ctx.Err() == nil && errors.Is(err, ErrBusy) {
		return shed(), nil
	}
	return d, err
}
