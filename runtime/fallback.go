package ratelimit

import (
	"context"
	"errors"
)

// localFallback is implemented by limiters that can decide a call in
// process when their backend cannot: [RedisLimiter], and types that embed
// one.
type localFallback interface {
	// decideLocally decides req in process, or reports false when it
	// cannot (see [WithFallbackProcesses]).
	decideLocally(ctx context.Context, req Request) (Decision, bool)
}

// fallback returns the decision of limiter's local fallback for req, which
// limiter could not decide because of err, when r's error policy is
// [FailLocal]; otherwise, or when the fallback cannot decide req, err. It
// takes req by value, so that only failed calls move a request to the heap.
func (r *Rule) fallback(ctx context.Context, limiter Limiter, req Request, err error) (Decision, error) {
	if ctx.Err() != nil || !errors.Is(err, ErrBackend) || r.policy(limiter) != FailLocal {
		return Decision{}, err
	}
	local, ok := innermost(limiter).(localFallback)
	if !ok {
		return Decision{}, err
	}
	d, ok := local.decideLocally(ctx, req)
	if !ok {
		return Decision{}, err
	}
	return d, nil
}

// newFallback returns the local fallback of a Redis limiter configured by
// c: a memory limiter with the same clock and key bound, and no hook (the
// Redis limiter reports its decisions).
func newFallback(c config) *MemoryLimiter {
	c.hook, c.overrides = nil, nil
	return newMemory(c)
}

// decideLocally decides req with the limiter's local fallback, against
// each process's share of its limits, and reports the decision to the hook
// as one of [SourceFallback]. See [localFallback].
func (l *RedisLimiter) decideLocally(ctx context.Context, req Request) (Decision, bool) {
	req.Key = boundKey(req.Key) // for the hook; the fallback bounds a 97-byte stand-in again
	local := req
	if n := l.fallbackProcesses; n > 1 {
		local.Limits = make([]Limit, len(req.Limits))
		for i, lim := range req.Limits {
			local.Limits[i] = lim.share(n)
		}
	}
	d, err := l.local.Allow(ctx, local)
	if err != nil {
		return Decision{}, false
	}
	d.Source = SourceFallback
	if l.hook != nil {
		l.decided(ctx, req, d)
	}
	return d, true
}

// share returns one of n processes' share of l: its threshold, and its
// burst or capacity when set, divided by n, rounded down but at least 1.
func (l Limit) share(n int) Limit {
	div := func(v int64) int64 { return max(v/int64(n), 1) }
	l.Threshold = div(l.Threshold)
	if l.Burst > 0 {
		l.Burst = div(l.Burst)
	}
	if l.Capacity > 0 {
		l.Capacity = div(l.Capacity)
	}
	return l
}
