package ratelimit

import (
	"context"
	"time"
)

// Reserve is Allow, also returning the time (µs since the Unix epoch) at
// which an admitted call was charged, for [MemoryLimiter.Adjust]. See
// [Reserver].
func (l *MemoryLimiter) Reserve(ctx context.Context, req Request) (Decision, time.Time, error) {
	d, at, err := l.reserve(ctx, req, true)
	return d, fromMicros(at), err
}

// reserve is Reserve, which tells the hook of its decision when report is
// set.
func (l *MemoryLimiter) reserve(ctx context.Context, req Request, report bool) (Decision, int64, error) {
	var d Decision
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
// positive (see [Reservation] for what either does per algorithm). Its
// twin is redislimit's adjust script. See [Reserver].
func (l *MemoryLimiter) Adjust(ctx context.Context, req Request, atTime time.Time, delta int64) error {
	at := micros(atTime)
	key, hash, _, err := l.locate(&req)
	if err != nil || delta == 0 {
		return err
	}
	now := l.now()
	shard := l.shardOf(hash)
	shard.mu.Lock()
	defer shard.mu.Unlock()
	e := shard.find(req.Name, key, hash)
	if e == nil {
		if delta < 0 {
			return nil // nothing left to refund
		}
		e = shard.entry(req.Name, key, hash, len(req.Limits), now, l.cfg.MaxKeys/shardCount+1)
	}
	if len(e.limits) < len(req.Limits) {
		e.limits = append(e.limits, make([]limitState, len(req.Limits)-len(e.limits))...)
	}
	for i, lim := range req.Limits {
		if lim.PerCall {
			continue // a settle changes what the call cost, not that it was made
		}
		p := memoryPlanOf(lim)
		s := &e.limits[i]
		if s.counter != p.counter {
			if delta < 0 || s.counter != 0 {
				// The limit has another algorithm's state now (an
				// override changed it): the reservation's state is gone.
				continue
			}
			*s = limitState{counter: p.counter}
		}
		if delta < 0 {
			s.refund(&p, now, at, -delta)
		} else if exp := s.chargeOnTop(&p, now, delta); exp > e.expiry {
			e.expiry = exp
		}
	}
	return nil
}
