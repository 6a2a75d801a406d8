package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/limitstate"
)

// Reserve is Allow, also returning the time (µs since the Unix epoch) at
// which an admitted call was charged, for [MemoryLimiter.Adjust]. See
// [OpReserve].
func (l *MemoryLimiter) Reserve(ctx context.Context, req Request) (Decision, time.Time, error) {
	d, at, err := l.reserve(ctx, req, true, 0)
	return d, time.UnixMicro(at), err
}

// ReserveHeld is Reserve, except that the units it charges to a
// SlidingLog limit weigh until hold past a period after the time it
// charged them at, as a lease's charge must (see [OpReserveHeld]); [MemoryLimiter.RefundHeld] gives them back. Its twin is
// redislimit's reserve script with a hold.
func (l *MemoryLimiter) ReserveHeld(ctx context.Context, req Request, hold time.Duration) (Decision, time.Time, error) {
	if err := validHold(&req, hold); err != nil {
		return Decision{}, time.Time{}, err
	}
	d, at, err := l.reserve(ctx, req, true, hold.Microseconds())
	return d, time.UnixMicro(at), err
}

// RefundHeld takes back up to n units that [MemoryLimiter.ReserveHeld]
// charged to req at the time at with hold: of each SlidingLog limit,
// those logged at at with that hold, newest first, a held entry keeping 2
// units or none (as [MemoryLimiter.Adjust] refunds them of the other
// limits). Its twin is redislimit's adjust script with a hold.
func (l *MemoryLimiter) RefundHeld(ctx context.Context, req Request, at time.Time, hold time.Duration, n int64) error {
	if err := validHold(&req, hold); err != nil || n <= 0 {
		return err
	}
	return l.adjust(ctx, req, at, hold.Microseconds(), -n)
}

// validHold returns the error of a held reservation of req with hold: a
// positive hold that each limit kept in a log (SlidingLog) can take (see
// limitfacts.CheckHold).
func validHold(req *Request, hold time.Duration) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if hold <= 0 {
		return fmt.Errorf("%w: %s: a hold of %v", ErrInvalidLimit, req.Name, hold)
	}
	for _, lim := range req.Limits {
		if a, _ := limitfacts.Lookup(string(lim.AlgorithmOrDefault())); a.State != limitfacts.Log {
			continue
		}
		if err := limitfacts.CheckHold(hold, lim.Period, lim.PerCall, req.Units()); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidLimit, req.Name, err)
		}
	}
	return nil
}

// reserve is Reserve, which tells the hook of its decision when report is
// set (always, of a request with a key per limit), holding the charge of
// its SlidingLog limits hold µs (see plansOf).
func (l *MemoryLimiter) reserve(ctx context.Context, req Request, report bool, hold int64) (Decision, int64, error) {
	var d Decision
	if req.Keys != nil {
		now, err := l.decideKeys(ctx, &req, true, hold, &d)
		return d, now, err
	}
	key, hash, mr, err := l.locate(&req)
	if err != nil {
		return d, 0, err
	}
	var buf [4]limitstate.Plan
	now := l.decidePair(req.Name, key, hash, plansOf(&req, mr, &buf, hold), req.Units(), &d)
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
// script. See [OpReserve].
func (l *MemoryLimiter) Adjust(ctx context.Context, req Request, atTime time.Time, delta int64) error {
	return l.adjust(ctx, req, atTime, 0, delta)
}

// adjust is Adjust of a reservation whose SlidingLog limits were held
// hold µs (0: none).
func (l *MemoryLimiter) adjust(_ context.Context, req Request, atTime time.Time, hold, delta int64) error {
	at := atTime.UnixMicro()
	if req.Keys != nil {
		if err := req.Validate(); err != nil || delta == 0 {
			return err
		}
		now := l.now()
		for i, lim := range req.Limits {
			name, j := req.Line(i)
			l.adjustOne(name, callkey.Bound(req.Keys[i]), j, lim, now, at, hold, delta)
		}
		return nil
	}
	key, _, _, err := l.locate(&req)
	if err != nil || delta == 0 {
		return err
	}
	now := l.now()
	for i, lim := range req.Limits {
		l.adjustOne(req.Name, key, i, lim, now, at, hold, delta)
	}
	return nil
}

// adjustOne is adjust of limit lim, whose state is limit i of (name, key).
func (l *MemoryLimiter) adjustOne(name, key string, i int, lim Limit, now, at, hold, delta int64) {
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
		e.limits = append(e.limits, make([]limitstate.State, i+1-len(e.limits))...)
	}
	p := statePlan(lim, hold)
	if exp := e.limits[i].Adjust(&p, now, at, delta); exp > e.expiry {
		e.expiry = exp
	}
}
