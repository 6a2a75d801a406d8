package ratelimit

import (
	"context"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
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
	now := l.now()
	shard := l.shardOf(hash)
	shard.mu.Lock()
	e := shard.entry(req.Name, key, hash, len(req.Limits), now, l.cfg.MaxKeys/shardCount+1)
	e.decide(&req, prep, now, true, &d)
	shard.mu.Unlock()
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

// refund takes back up to n units charged at the time at (see
// [Reservation]). Its twin is redislimit/lua/adjust.lua.tmpl's refund.
func (s *limitState) refund(p *memoryPlan, now, at, n int64) {
	switch p.counter {
	case fixedCounter:
		s.windowState.fixedRefund(p, now, at, n)
	case slidingCounter:
		s.windowState.slidingRefund(p.Period, now, at, n)
	case tokenCounter, gcraCounter, leakyCounter:
		s.bucketState.tatRefund(p, now, n)
	default:
		s.logState.refund(p.Period, now, at, n)
	}
}

// chargeOnTop charges n units without deciding, at most what takes the
// state to twice the limit's capacity (a sliding window's count to
// [MaxSlidingWindowThreshold], which its Redis key packs), and returns when the state stops
// mattering (µs), or 0 when it charged nothing.
func (s *limitState) chargeOnTop(p *memoryPlan, now, n int64) int64 {
	switch p.counter {
	case fixedCounter:
		w := &s.windowState
		w.fixedWindow(p, now)
		if n = min(n, 2*p.Capacity-w.count); n <= 0 {
			return 0
		}
		return w.fixedCharge(p, now, n)
	case slidingCounter:
		w := &s.windowState
		w.slidingWindows(p.Period, now)
		if n = min(n, min(2*p.Capacity, MaxSlidingWindowThreshold)-w.count); n <= 0 {
			return 0
		}
		return w.slidingCharge(p.Period, now, n)
	case tokenCounter, gcraCounter, leakyCounter:
		return s.bucketState.tatChargeOnTop(p, now, n)
	}
	l := &s.logState
	l.trim(now - p.Period)
	if n = min(n, 2*p.Capacity-l.units); n <= 0 {
		return 0
	}
	return l.charge(p.Period, now, n)
}

// refund removes up to n units logged at the time at, newest first,
// unless they left the window. Its twin removes as many entries of at
// (LREM).
func (s *logState) refund(period, now, at, n int64) {
	if at <= now-period {
		return
	}
	emptied := false
	for i := s.count - 1; i >= 0 && n > 0; i-- {
		if r := s.at(i); r.at == at {
			d := min(n, r.units)
			r.units, s.units, n = r.units-d, s.units-d, n-d
			emptied = emptied || r.units == 0
		}
	}
	if !emptied {
		return
	}
	kept := make([]logRun, 0, len(s.runs))
	for i := 0; i < s.count; i++ {
		if r := *s.at(i); r.units > 0 {
			kept = append(kept, r)
		}
	}
	s.runs, s.head, s.count = kept[:len(s.runs)], 0, len(kept)
	if s.count == 0 {
		*s = logState{}
	}
}

// windowEnd returns the end (ms) of the aligned window of period (µs) that
// the time at (µs) is in.
func windowEnd(period, at int64) int64 { return (at - at%period + period) / 1000 }

// fixedRefund takes up to n units off the window that the time at is in
// (a calendar period's too), if the state is that window and it has not
// ended.
func (w *windowState) fixedRefund(p *memoryPlan, now, at, n int64) {
	end := p.windowEnd(at) / 1000
	if w.count == 0 || w.stateEnd != end || now/1000 >= end {
		return
	}
	w.count -= min(n, w.count)
}

// slidingRefund takes up to n units off the current window's count, if it
// is the window that the time at is in and it has not ended.
func (w *windowState) slidingRefund(period, now, at, n int64) {
	end := windowEnd(period, at)
	if w.count == 0 || w.stateEnd-period/1000 != end || now/1000 >= end {
		return
	}
	w.count -= min(n, w.count)
}

// tatRefund moves the TAT back by n emission intervals, never before now
// (a full bucket, which is no state).
func (s *bucketState) tatRefund(p *memoryPlan, now, n int64) {
	ta, tf := s.tatFrom(p.Threshold, now)
	if ta == now && tf == 0 {
		return
	}
	n = min(n, 2*p.Capacity) // more moves it to now all the same
	k, m := muldiv.Rem(n, p.Period, p.Threshold)
	na, nf := ta-k, tf-m
	if nf < 0 {
		na, nf = na-1, nf+p.Threshold
	}
	if na < now || na == now && nf == 0 {
		*s = bucketState{}
		return
	}
	s.tat, s.tatFrac = na, nf
}

// tatChargeOnTop moves the TAT on by n emission intervals, at most to
// twice the bucket's depth ahead of now, and returns when the bucket is
// empty again (µs).
func (s *bucketState) tatChargeOnTop(p *memoryPlan, now, n int64) int64 {
	ta, tf := s.tatFrom(p.Threshold, now)
	na, nf := p.addInterval(ta, tf, min(n, 2*p.Capacity))
	ca, cf := now+2*p.depth, 2*p.depthFrac
	if cf >= p.Threshold {
		ca, cf = ca+1, cf-p.Threshold
	}
	if na > ca || na == ca && nf > cf {
		na, nf = ca, cf
	}
	s.tat, s.tatFrac = na, nf
	return na + ceilFrac(nf)
}
