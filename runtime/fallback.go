package ratelimit

import (
	"context"
	"errors"
)

// fallback returns the decision of limiter's fallback ([OpFallback]) for req, which
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
	if !can(limiter, OpFallback) {
		return Decision{}, nil, err
	}
	res, lerr := limiter.Do(ctx, Op{Kind: OpFallback, Request: req})
	if lerr != nil {
		return Decision{}, nil, err
	}
	d, limits := res.Decision, res.Limits
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
