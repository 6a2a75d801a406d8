package ratelimit

import (
	"context"
	"errors"
	"fmt"
)

// ErrorPolicy says what to do with a call when the limiter cannot decide it.
type ErrorPolicy string

// The error policies. The zero value means the limiter's default.
const (
	// FailOpen lets the call through and reports the error to the hook.
	FailOpen ErrorPolicy = "allow"
	// FailClosed denies the call with an error wrapping ErrBackend.
	FailClosed ErrorPolicy = "deny"
	// FailLocal has the call decided by the limiter's in-process fallback
	// (see [OpFallback]), so an outage never lifts a limit; a call the
	// fallback cannot decide, and the calls of a limiter without one, fail
	// as under FailClosed.
	FailLocal ErrorPolicy = "local"
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

// failure returns what Check returns when no decision was made for the
// call, because of err.
func (r *Rule) failure(ctx context.Context, limiter Limiter, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return err
	}
	if !errors.Is(err, ErrBackend) {
		return err
	}
	if r.Shadow || r.policy(limiter) == FailOpen {
		return nil
	}
	return err
}

// policy returns the error policy that applies to r's calls on limiter.
func (r *Rule) policy(limiter Limiter) ErrorPolicy {
	p := r.OnError
	if p == "" {
		if c := configOf(limiter); c != nil {
			p = c.ErrorPolicy
		}
	}
	switch p {
	case FailOpen:
		return FailOpen
	case "", FailLocal:
		return FailLocal
	}
	return FailClosed
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
