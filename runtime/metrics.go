package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
)

// Counters are the numbers [Metrics] keeps for one limit name.
type Counters struct {
	// Allowed counts admitting decisions.
	Allowed uint64
	// Limited counts denying decisions. A call that waits ([Rule.Wait])
	// is decided once per attempt, so each denied attempt counts.
	Limited uint64
	// ShadowLimited counts the decisions that would have denied a call of
	// a shadow rule ([Rule.Shadow]), which went ahead.
	ShadowLimited uint64
	// BackendErrors counts calls that could not be decided because the
	// backend failed, including those failed at once by an open circuit
	// breaker.
	BackendErrors uint64
	// NearLimit counts admitting decisions that left at most 10% of the
	// threshold of the limit with the fewest units remaining.
	NearLimit uint64
	// Cached counts the denials, real or shadow, that the Redis limiter's
	// deny cache repeated without asking Redis ([SourceCache]); each is
	// also counted in Limited or ShadowLimited.
	Cached uint64
	// Fallback counts the decisions made by the local fallback while the
	// backend could not decide ([FailLocal], [SourceFallback]); each is
	// also counted as Allowed, Limited or ShadowLimited, and its backend
	// failure as one of BackendErrors.
	Fallback uint64
}

// Metrics is a [Hook] (and a [ShadowHook]) that counts decisions and
// failures per limit name ([Request.Name]) with atomic counters, for
// exporting to a monitoring system. Its zero value is ready to use, and it
// is safe for concurrent use. Pass it with [WithHook], or with other hooks
// through [Hooks].
type Metrics struct {
	names sync.Map // name → *counters
}

type counters struct {
	allowed, limited, shadowLimited, backendErrors, nearLimit, cached, fallback atomic.Uint64
}

func (m *Metrics) of(name string) *counters {
	if c, ok := m.names.Load(name); ok {
		return c.(*counters)
	}
	c, _ := m.names.LoadOrStore(name, new(counters))
	return c.(*counters)
}

// Decided counts an admission or a denial. See [Hook].
func (m *Metrics) Decided(_ context.Context, req *Request, d Decision) {
	c := m.of(req.Name)
	c.countSource(d)
	if !d.Allowed {
		c.limited.Add(1)
		return
	}
	c.allowed.Add(1)
	if nearLimit(req, d) {
		c.nearLimit.Add(1)
	}
}

// ShadowLimited counts a would-be denial. See [ShadowHook].
func (m *Metrics) ShadowLimited(_ context.Context, req *Request, d Decision) {
	c := m.of(req.Name)
	c.countSource(d)
	c.shadowLimited.Add(1)
}

// countSource counts d by what made it, when the deny cache or the local
// fallback did.
func (c *counters) countSource(d Decision) {
	switch d.Source {
	case SourceCache:
		c.cached.Add(1)
	case SourceFallback:
		c.fallback.Add(1)
	}
}

// Failed counts a backend failure. See [Hook].
func (m *Metrics) Failed(_ context.Context, req *Request, _ error) {
	m.of(req.Name).backendErrors.Add(1)
}

// Snapshot returns the counters of every limit name seen so far. Each
// counter is read atomically, the set of them is not: counts that change
// during the call may be read before or after the change.
func (m *Metrics) Snapshot() map[string]Counters {
	out := make(map[string]Counters)
	m.names.Range(func(k, v any) bool {
		c := v.(*counters)
		out[k.(string)] = Counters{
			Allowed:       c.allowed.Load(),
			Limited:       c.limited.Load(),
			ShadowLimited: c.shadowLimited.Load(),
			BackendErrors: c.backendErrors.Load(),
			NearLimit:     c.nearLimit.Load(),
			Cached:        c.cached.Load(),
			Fallback:      c.fallback.Load(),
		}
		return true
	})
	return out
}

// nearLimit reports whether the admission d left at most 10% of the
// threshold of the limit it describes.
func nearLimit(req *Request, d Decision) bool {
	if d.LimitIndex < 0 || d.LimitIndex >= len(req.Limits) {
		return false
	}
	return d.Remaining <= req.Limits[d.LimitIndex].Threshold/10
}
