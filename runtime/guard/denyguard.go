package guard

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/monotime"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// DenyCache is the deny cache guard: a [ratelimit.Limiter] that repeats
// its backend's recent denials without asking it (see [WithDenyCache]).
// It intercepts Allow and, when the backend offers them, Reserve and
// Adjust ([ratelimit.OpReserve]), ReserveSlot ([ratelimit.OpTakeSlot]) and
// Reset ([ratelimit.OpReset]), and passes on the other operations.
type DenyCache struct {
	backend                                       // what it wraps, and the capabilities it offers
	slack   func([]ratelimit.Limit) time.Duration // the backend's slack ([WithDenySlack]), or nil
	// clock is the backend's WithClock clock; nil when it decides on its own.
	clock ratelimit.Clock
	// hook is the backend's hook, told of the denials the cache repeats.
	hook ratelimit.Hook
	hold time.Duration
	// latest is the latest time (µs) of the clock a call was passed on at.
	latest atomic.Int64
	cache  *denyCache
}

// newDenyGuard returns the deny cache guard of backend, sized and held as
// the options of this package among opts say, or nil when they turn it
// off. It reads the backend's clock and hook from its [ratelimit.Config]
// (the Config of its [ratelimit.Abilities]), and its slack from
// [WithDenySlack].
func newDenyGuard(backend ratelimit.Limiter, opts ...Option) *DenyCache {
	s := newSettings(opts)
	cache := newDenyCache(s.denyCache)
	if cache == nil {
		return nil
	}
	c := &DenyCache{backend: backendOf(backend), hold: s.denyHold, cache: cache, slack: s.denySlack}
	c.ops.Reserve, c.ops.Adjust, c.ops.TakeSlot, c.ops.Reset = c.Reserve, c.Adjust, c.ReserveSlot, c.Reset
	if cfg := backend.Abilities().Config; cfg != nil {
		c.clock, c.hook = cfg.Clock, cfg.Hook
	}
	return c
}

// Unwrap returns the backend.
func (c *DenyCache) Unwrap() ratelimit.Limiter { return c.next }

// Do answers OpReserve as Allow, forgets what OpAdjust, OpTakeSlot and
// OpReset change, and passes on the other operations. See
// [ratelimit.Limiter].
func (c *DenyCache) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return c.do(ctx, c, op)
}

// Allow repeats a denial of req the cache holds, telling the backend's
// hook, or asks the backend and remembers its denial. Calls with a key
// per limit go to the backend. See [ratelimit.Limiter].
func (c *DenyCache) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if req.Keys != nil {
		return c.next.Allow(ctx, req)
	}
	seen := req
	seen.Key = callkey.Bound(req.Key)
	p, d, hit := c.lookup(ctx, &seen)
	if hit {
		return d, nil
	}
	d, err := c.next.Allow(ctx, req)
	if err == nil && !d.Allowed {
		c.remember(&seen, p, d)
	}
	return d, err
}

// Reserve is Allow for the backend's Reserve: a denial the cache holds is
// the backend's answer to a reservation too (it charges nothing).
func (c *DenyCache) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	if c.reserver == nil {
		return ratelimit.Decision{}, time.Time{}, c.unsupported("reserve")
	}
	if req.Keys != nil {
		return c.reserver.Reserve(ctx, req)
	}
	seen := req
	seen.Key = callkey.Bound(req.Key)
	p, d, hit := c.lookup(ctx, &seen)
	if hit {
		return d, time.UnixMicro(0), nil
	}
	d, at, err := c.reserver.Reserve(ctx, req)
	if err == nil && !d.Allowed {
		c.remember(&seen, p, d)
	}
	return d, at, err
}

// Adjust passes the adjustment on to the backend and, once it is made,
// forgets the name's denials: a refund may admit what the cache holds
// denied, and a charge on top makes a denial's retry later than the cache
// would tell (those remembered while the backend adjusted too).
func (c *DenyCache) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if c.reserver == nil {
		return c.unsupported("adjust")
	}
	if delta == 0 {
		return c.reserver.Adjust(ctx, req, at, delta) // nothing to change
	}
	c.now() // the cache answers at no time before a call's (see now)
	if err := c.reserver.Adjust(ctx, req, at, delta); err != nil {
		return err
	}
	c.cache.forget(req.Name)
	return nil
}

// ReserveSlot passes the call on to the backend, after noting its time
// (see now).
func (c *DenyCache) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	if c.slots == nil {
		return ratelimit.Decision{}, time.Time{}, c.unsupported("hold concurrency slots")
	}
	c.now()
	return c.slots.ReserveSlot(ctx, req, slot, token)
}

// Reset resets name and key in the backend and, once it did, forgets the
// denials the cache holds for name, of every key. Other processes' caches
// are not told: each may keep denying the key for at most its deny hold,
// and so may this one for a call in flight during the Reset whose denial
// it remembers after.
func (c *DenyCache) Reset(ctx context.Context, name, key string) error {
	if c.resetter == nil {
		return c.unsupported("reset")
	}
	if err := c.resetter.Reset(ctx, name, key); err != nil {
		return err
	}
	c.cache.forget(name)
	return nil
}

// CachedDenial returns how much longer the cache repeats a denial of req
// without asking the backend, and whether it holds one.
func (c *DenyCache) CachedDenial(req ratelimit.Request) (time.Duration, bool) {
	if req.Keys != nil || req.Validate() != nil {
		return 0, false // calls with a key per limit are not cached
	}
	req.Key = callkey.Named(req.Key)
	now, _ := c.now()
	e, ok := c.cache.held(&req, now)
	if !ok {
		return 0, false
	}
	return time.Duration(e.until-now) * time.Microsecond, true
}

// lookup returns the denial of req the cache repeats now, telling the
// hook, if it holds one for a valid req; else what remember needs.
func (c *DenyCache) lookup(ctx context.Context, req *ratelimit.Request) (denyProbe, ratelimit.Decision, bool) {
	now, ok := c.now()
	d, p, hit := c.cache.lookup(req, now)
	if !hit || !ok || req.Validate() != nil {
		// An invalid request is the backend's to refuse; the cache holds
		// denials of valid ones only.
		return p, ratelimit.Decision{}, false
	}
	if c.hook != nil {
		c.decided(ctx, *req, d)
	}
	return p, d, true
}

// remember keeps the backend's denial d of req, looked up as p says.
func (c *DenyCache) remember(req *ratelimit.Request, p denyProbe, d ratelimit.Decision) {
	recv, _ := c.now()
	var slack time.Duration
	if c.slack != nil && c.clock == nil {
		slack = c.slack(req.Limits)
	}
	c.cache.remember(req, p, d, recv, slack, c.hold)
}

// now returns the cache's time in µs, and whether the cache may answer at
// it. Without a clock it is the process's monotonic clock, which steps
// with neither the wall clock nor the backend's, and the cache may always
// answer. With one, it is the clock's time (at which the backend decides),
// and the cache may answer only when no call was passed on at a later
// time: such a call may have dropped state (a log's entries) that counts
// at an earlier time.
func (c *DenyCache) now() (int64, bool) {
	if c.clock == nil {
		return monotime.Micros(), true
	}
	now := c.clock.Now().UnixMicro()
	for {
		latest := c.latest.Load()
		if now <= latest {
			return now, now == latest
		}
		if c.latest.CompareAndSwap(latest, now) {
			return now, true
		}
	}
}

// decided reports d, the repeated denial of req, to the hook. It takes req
// by value, so that only a guard with a hook moves a request to the heap.
func (c *DenyCache) decided(ctx context.Context, req ratelimit.Request, d ratelimit.Decision) {
	seen := ratelimit.Request{Name: req.Name, Key: req.Key, Cost: req.Cost, Limits: req.Limits, Rule: req.Rule}
	c.hook.Decided(ctx, &seen, d)
}

// unsupported is the error of a capability the backend does not offer.
func (c *DenyCache) unsupported(what string) error {
	return unsupported(c.next, what)
}
