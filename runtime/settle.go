package ratelimit

import (
	"context"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// Reserve is Allow, also returning the time (µs since the Unix epoch) at
// which an admitted call was charged, for [MemoryLimiter.Adjust]. See
// [Reserver].
func (l *MemoryLimiter) Reserve(ctx context.Context, req Request) (Decision, time.Time, error) {
	d, at, err := l.reserve(ctx, req, true)
	return d, fromMicros(at), err
}

// reserve is Reserve, which tells the hook of its decision when report is
// set (always, of a request with a key per limit).
func (l *MemoryLimiter) reserve(ctx context.Context, req Request, report bool) (Decision, int64, error) {
	var d Decision
	if req.Keys != nil {
		now, err := l.decideKeys(ctx, &req, true, &d)
		return d, now, err
	}
	key, hash, prep, err := l.locate(&req)
	if err != nil {
		return d, 0, err
	}
	var buf [4]memoryPlan
	now := l.decidePair(req.Name, key, hash, plansOf(&req, prep, &buf), req.Units(), &d)
	if report && l.cfg.Hook != nil {
		l.report(ctx, req, key, d)
	}
	return d, now, nil
}

// Adjust changes the charge of req, which [MemoryLimiter.Reserve] admitted
// at the time at, by delta units without deciding anything: it refunds
// -delta units when delta is negative, and charges delta more when it is
// positive (see [Reservation] for what either does per algorithm). Each
// limit's state is where a decision keeps it: under the limit's own key
// for a request with a key per limit (Keys), and a shared line's under
// its own name ([Request.Line]). A limit that counts calls
// ([Limit.PerCall]) is left as it is. Its twin is redislimit's adjust
// script. See [Reserver].
func (l *MemoryLimiter) Adjust(ctx context.Context, req Request, atTime time.Time, delta int64) error {
	at := micros(atTime)
	if req.Keys != nil {
		if err := req.Validate(); err != nil || delta == 0 {
			return err
		}
		now := l.now()
		for i, lim := range req.Limits {
			name, j := req.Line(i)
			l.adjustOne(name, callkey.Bound(req.Keys[i]), j, lim, now, at, delta)
		}
		return nil
	}
	key, _, _, err := l.locate(&req)
	if err != nil || delta == 0 {
		return err
	}
	now := l.now()
	for i, lim := range req.Limits {
		l.adjustOne(req.Name, key, i, lim, now, at, delta)
	}
	return nil
}

// adjustOne is Adjust of limit lim, whose state is limit i of (name, key).
func (l *MemoryLimiter) adjustOne(name, key string, i int, lim Limit, now, at, delta int64) {
	if lim.PerCall {
		return // a settle changes what the call cost, not that it was made
	}
	hash := l.hashOf(name, key, nil)
	shard := l.shardOf(hash)
	shard.mu.Lock()
	defer shard.mu.Unlock()
	e := shard.find(name, key, hash)
	if e == nil {
		if delta < 0 {
			return // nothing left to refund
		}
		e = shard.entry(name, key, hash, i+1, now, l.cfg.MaxKeys/shardCount+1)
	}
	if len(e.limits) <= i {
		e.limits = append(e.limits, make([]limitState, i+1-len(e.limits))...)
	}
	p := memoryPlanOf(lim)
	s := &e.limits[i]
	if s.counter != p.counter {
		if delta < 0 || s.counter != 0 {
			// The limit has another algorithm's state now (an override
			// changed it): the reservation's state is gone.
			return
		}
		*s = limitState{counter: p.counter}
	}
	if delta < 0 {
		s.refund(&p, now, at, -delta)
	} else if exp := s.chargeOnTop(&p, now, delta); exp > e.expiry {
		e.expiry = exp
	}
}
