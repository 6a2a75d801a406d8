package redislimit

import (
	"context"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// newFallback returns the local fallback of a Redis limiter configured by
// c: a memory limiter with the same clock and key bound, and no hook (the
// Redis limiter reports its decisions).
func newFallback(c ratelimit.Config) *ratelimit.MemoryLimiter {
	return ratelimit.NewMemory(ratelimit.WithClock(c.Clock), ratelimit.WithMaxKeys(c.MaxKeys))
}

// AllowLocal decides req with the limiter's local fallback, against each
// process's share of its limits (see [WithFallbackProcesses]), reports the
// decision to the hook as one of [ratelimit.SourceFallback], against the
// shares, and returns the shares: the limits a denied caller is told. An
// admitted call is remembered, to be charged to Redis when it answers
// again (see the package doc, Outages). See [ratelimit.Fallback].
func (l *redisBackend) AllowLocal(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, []ratelimit.Limit, error) {
	req.Key = callkey.Bound(req.Key) // for the hook; the fallback bounds a 97-byte stand-in again
	if req.Keys != nil {
		req.Keys = boundKeys(req.Keys, callkey.Bound)
	}
	local := req
	if n := l.processes(); n > 1 {
		local.Limits = make([]ratelimit.Limit, len(req.Limits))
		for i, lim := range req.Limits {
			local.Limits[i] = share(lim, n)
		}
	}
	d, err := l.local.Allow(ctx, local)
	if err != nil {
		return ratelimit.Decision{}, nil, err
	}
	d.Source = ratelimit.SourceFallback
	if d.Allowed && l.carry != nil {
		l.carry.record(&req, nil, l.wallNow())
	}
	if l.cfg.Hook != nil {
		l.decided(ctx, local, d)
	}
	return d, local.Limits, nil
}

var _ ratelimit.Fallback = (*Limiter)(nil)

// share returns one of n processes' share of l: its threshold, and its
// burst or capacity when set, divided by n, rounded down but at least 1.
func share(l ratelimit.Limit, n int) ratelimit.Limit {
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
