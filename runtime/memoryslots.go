package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// The memory limiter's concurrency slots (see [OpTakeSlot]).

// slotTable holds a memory limiter's concurrency slots: per name and key,
// each token's lease end (µs).
type slotTable struct {
	mu   sync.Mutex
	held map[[2]string]map[string]int64
}

// ReserveSlot decides req's rate limits and a slot of slot under token,
// all or nothing. See [Rule.Reserve] and the concurrency limits there.
func (l *MemoryLimiter) ReserveSlot(ctx context.Context, req Request, slot Limit, token string) (Decision, time.Time, error) {
	d, at, err := l.reserveSlot(ctx, req, slot, token)
	return d, time.UnixMicro(at), err
}

// reserveSlot is ReserveSlot, with the time in µs since the Unix epoch.
func (l *MemoryLimiter) reserveSlot(ctx context.Context, req Request, slot Limit, token string) (Decision, int64, error) {
	t := &l.slots
	k := [2]string{req.Name, callkey.Bound(req.Key)}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := l.now()
	m := t.live(k, now)
	if d, full := slotDenial(m, slot, now, len(req.Limits)); full {
		return d, now, nil
	}
	d := Decision{Allowed: true, Remaining: slot.Threshold - int64(len(m)) - 1}
	if len(req.Limits) > 0 {
		var err error
		if d, now, err = l.reserve(ctx, req, false, 0); err != nil || !d.Allowed {
			return d, now, err
		}
	}
	if m == nil {
		if t.held == nil {
			t.held = map[[2]string]map[string]int64{}
		}
		m = map[string]int64{}
		t.held[k] = m
	}
	m[token] = now + limitfacts.Lease(slot.Period).Microseconds()
	return d, now, nil
}

// freeSlots returns how many slots of req's concurrency limit, of
// threshold slots, are free now.
func (l *MemoryLimiter) freeSlots(req *Request, slots int64) int64 {
	t := &l.slots
	t.mu.Lock()
	defer t.mu.Unlock()
	return slots - int64(len(t.live([2]string{req.Name, callkey.Bound(req.Key)}, l.now())))
}

// slotDenial returns the denial of a call for want of a slot when the
// slots held, m, are all of slot's at now (full); index is the slot's
// LimitIndex.
func slotDenial(m map[string]int64, slot Limit, now int64, index int) (d Decision, full bool) {
	if int64(len(m)) < slot.Threshold {
		return Decision{}, false
	}
	soonest, last := int64(-1), int64(0)
	for _, end := range m {
		if soonest < 0 || end < soonest {
			soonest = end
		}
		last = max(last, end)
	}
	us := func(t int64) time.Duration { return time.Duration(t) * time.Microsecond }
	return Decision{RetryAfter: us(soonest - now), ResetAfter: us(last - now), LimitIndex: index}, true
}

// PeekSlot returns the decision ReserveSlot would return now, charging
// and taking nothing, and how many slots are held now. It drops the slots
// whose lease ended, as a call would.
func (l *MemoryLimiter) PeekSlot(_ context.Context, req Request, slot Limit) (Decision, int64, error) {
	t := &l.slots
	k := [2]string{req.Name, callkey.Named(req.Key)}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := l.now()
	m := t.live(k, now)
	held := int64(len(m))
	if d, full := slotDenial(m, slot, now, len(req.Limits)); full {
		return d, held, nil
	}
	if len(req.Limits) == 0 {
		return Decision{Allowed: true, Remaining: slot.Threshold - held - 1}, held, nil
	}
	d, err := l.peekOne(&req)
	return d, held, err
}

// live returns the slots of k whose lease has not ended at now, dropping
// the others.
func (t *slotTable) live(k [2]string, now int64) map[string]int64 {
	m := t.held[k]
	for token, end := range m {
		if end <= now {
			delete(m, token)
		}
	}
	if m != nil && len(m) == 0 {
		delete(t.held, k)
		return nil
	}
	return m
}

// ReleaseSlot gives back the slot held under token. See [Reservation.Release].
func (l *MemoryLimiter) ReleaseSlot(_ context.Context, req Request, _ Limit, token string) error {
	t := &l.slots
	k := [2]string{req.Name, callkey.Bound(req.Key)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.held[k]; m != nil {
		delete(m, token)
		if len(m) == 0 {
			delete(t.held, k)
		}
	}
	return nil
}

// RenewSlot renews the lease of the slot held under token, and reports
// whether it was still held.
func (l *MemoryLimiter) RenewSlot(_ context.Context, req Request, slot Limit, token string) (bool, error) {
	t := &l.slots
	k := [2]string{req.Name, callkey.Bound(req.Key)}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := l.now()
	m := t.live(k, now)
	if _, ok := m[token]; !ok {
		return false, nil
	}
	m[token] = now + limitfacts.Lease(slot.Period).Microseconds()
	return true, nil
}
