package limitmetrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Counters are the numbers [Metrics] keeps for one limit name.
type Counters struct {
	// Allowed counts admitting decisions.
	Allowed uint64
	// Limited counts denying decisions. A call that waits ([ratelimit.Rule.Wait])
	// is decided once per attempt, so each denied attempt counts.
	Limited uint64
	// ShadowLimited counts the decisions that would have denied a call of
	// a shadow rule ([ratelimit.Rule.Shadow]), which went ahead.
	ShadowLimited uint64
	// BackendErrors counts calls that could not be decided because the
	// backend failed, including those failed at once by an open circuit
	// breaker.
	BackendErrors uint64
	// NearLimit counts admitting decisions that left at most 10% of the
	// threshold of the limit with the fewest units remaining.
	NearLimit uint64
	// Cached counts the denials, real or shadow, that the Redis limiter's
	// deny cache repeated without asking Redis ([ratelimit.SourceCache]); each is
	// also counted in Limited or ShadowLimited.
	Cached uint64
	// Fallback counts the decisions made by the local fallback while the
	// backend could not decide ([ratelimit.FailLocal], [ratelimit.SourceFallback]); each is
	// also counted as Allowed, Limited or ShadowLimited, and its backend
	// failure as one of BackendErrors.
	Fallback uint64
	// InFlight is how many calls of this process hold a slot of the
	// name's concurrency limit now (see [ratelimit.Rule.Reserve]): a gauge.
	InFlight int64
}

// Metrics is a [ratelimit.Hook] (and a [ratelimit.ShadowHook] and a [ratelimit.BreakerHook]) that counts
// decisions and failures per limit name ([ratelimit.Request.Name]), and the state of
// circuit breakers per node, with atomic counters, for exporting to a
// monitoring system. Its zero value is ready to use, and it is safe for
// concurrent use. Pass it with [ratelimit.WithHook], alone or beside
// other hooks.
type Metrics struct {
	names    sync.Map // name → *counters
	breakers sync.Map // node → *breakerCounters
}

// numSources is how many Sources there are.
const numSources = int(ratelimit.SourceLease) + 1

type counters struct {
	by            [numSources]sourceCounters // by the decisions' ratelimit.Source
	backendErrors atomic.Uint64
	inFlight      atomic.Int64
}

type sourceCounters struct {
	allowed, limited, shadowLimited, nearLimit atomic.Uint64
}

type breakerCounters struct {
	open   atomic.Bool
	opened atomic.Uint64
}

// BreakerState is what [Metrics] knows of one circuit breaker.
type BreakerState struct {
	// Open reports whether the breaker is open: its node's calls fail at
	// once (or go to the fallback) without being sent.
	Open bool
	// Opened counts the times it opened.
	Opened uint64
}

func (m *Metrics) of(name string) *counters {
	if c, ok := m.names.Load(name); ok {
		return c.(*counters)
	}
	c, _ := m.names.LoadOrStore(name, new(counters))
	return c.(*counters)
}

// source returns the counters of the decisions of source s.
func (c *counters) source(s ratelimit.Source) *sourceCounters {
	if int(s) >= numSources {
		s = ratelimit.SourceBackend // a limiter of another module's own source
	}
	return &c.by[s]
}

// Decided counts an admission or a denial. See [ratelimit.Hook].
func (m *Metrics) Decided(_ context.Context, req *ratelimit.Request, d ratelimit.Decision) {
	c := m.of(req.Name).source(d.Source)
	if !d.Allowed {
		c.limited.Add(1)
		return
	}
	c.allowed.Add(1)
	if nearLimit(req, d) {
		c.nearLimit.Add(1)
	}
}

// ShadowLimited counts a would-be denial. See [ratelimit.ShadowHook].
func (m *Metrics) ShadowLimited(_ context.Context, req *ratelimit.Request, d ratelimit.Decision) {
	m.of(req.Name).source(d.Source).shadowLimited.Add(1)
}

// Failed counts a backend failure. See [ratelimit.Hook].
func (m *Metrics) Failed(_ context.Context, req *ratelimit.Request, _ error) {
	m.of(req.Name).backendErrors.Add(1)
}

// InFlight counts the calls holding a concurrency slot of name: delta is
// 1 when a call takes one, -1 when it gives it back (see [ratelimit.Rule.Reserve]).
func (m *Metrics) InFlight(_ context.Context, name string, delta int) {
	m.of(name).inFlight.Add(int64(delta))
}

// BreakerOpened counts the opening of node's breaker. See [ratelimit.BreakerHook].
func (m *Metrics) BreakerOpened(node string, _ error) {
	b := m.breaker(node)
	b.opened.Add(1)
	b.open.Store(true)
}

// BreakerClosed records that node's breaker closed. See [ratelimit.BreakerHook].
func (m *Metrics) BreakerClosed(node string, _ time.Duration) {
	m.breaker(node).open.Store(false)
}

func (m *Metrics) breaker(node string) *breakerCounters {
	if b, ok := m.breakers.Load(node); ok {
		return b.(*breakerCounters)
	}
	b, _ := m.breakers.LoadOrStore(node, new(breakerCounters))
	return b.(*breakerCounters)
}

// Snapshot returns the counters of every limit name seen so far. Each
// counter is read atomically, the set of them is not: counts that change
// during the call may be read before or after the change.
func (m *Metrics) Snapshot() map[string]Counters {
	out := make(map[string]Counters)
	m.names.Range(func(k, v any) bool {
		c := v.(*counters)
		var n Counters
		for s := range numSources {
			n.add(ratelimit.Source(s), &c.by[s])
		}
		n.BackendErrors = c.backendErrors.Load()
		n.InFlight = c.inFlight.Load()
		out[k.(string)] = n
		return true
	})
	return out
}

// SnapshotSource returns the counters of the decisions that source made,
// for every limit name seen so far: Snapshot's, but counting only those
// decisions, and no backend errors (which are no decisions). The counters
// of the sources add up to Snapshot's; SnapshotSource(SourceCache) and
// SnapshotSource(SourceOverride) have only denials.
func (m *Metrics) SnapshotSource(source ratelimit.Source) map[string]Counters {
	out := make(map[string]Counters)
	if int(source) >= numSources {
		return out
	}
	m.names.Range(func(k, v any) bool {
		var n Counters
		n.add(source, v.(*counters).source(source))
		out[k.(string)] = n
		return true
	})
	return out
}

// add adds the counts of the decisions c of source s to n.
func (n *Counters) add(s ratelimit.Source, c *sourceCounters) {
	allowed, limited, shadow := c.allowed.Load(), c.limited.Load(), c.shadowLimited.Load()
	n.Allowed += allowed
	n.Limited += limited
	n.ShadowLimited += shadow
	n.NearLimit += c.nearLimit.Load()
	switch s {
	case ratelimit.SourceCache:
		n.Cached += allowed + limited + shadow
	case ratelimit.SourceFallback:
		n.Fallback += allowed + limited + shadow
	}
}

// Breakers returns the state of every circuit breaker that has opened so
// far, by node (see [ratelimit.BreakerHook]).
func (m *Metrics) Breakers() map[string]BreakerState {
	out := make(map[string]BreakerState)
	m.breakers.Range(func(k, v any) bool {
		b := v.(*breakerCounters)
		out[k.(string)] = BreakerState{Open: b.open.Load(), Opened: b.opened.Load()}
		return true
	})
	return out
}

// nearLimit reports whether the admission d left at most 10% of the
// threshold of the limit it describes.
func nearLimit(req *ratelimit.Request, d ratelimit.Decision) bool {
	if d.LimitIndex < 0 || d.LimitIndex >= len(req.Limits) {
		return false
	}
	return d.Remaining <= req.Limits[d.LimitIndex].Threshold/10
}

// The hooks Metrics is.
var (
	_ ratelimit.ShadowHook   = (*Metrics)(nil)
	_ ratelimit.InFlightHook = (*Metrics)(nil)
	_ ratelimit.BreakerHook  = (*Metrics)(nil)
)
