package limitertest

import (
	"context"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// settles are the crosses of Reservation.Settle: the final charge less
// or more than the units reserved (reserveUnits), by delta.
var settles = []struct {
	name  string
	delta int64
}{{"refund_all", -reserveUnits}, {"refund", -1}, {"exact", 0}, {"debt", 2}}

// reserveUnits is what the reservations of the settle crosses take.
const reserveUnits = 3

// reserveSettle: reservations of a limit of alg settled with delta more
// units than they took, between calls that see what the settles left.
func (s *suite) reserveSettle(t *testing.T, alg ratelimit.Algorithm, delta int64) {
	need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	period := 30 * time.Millisecond // short: a leaky bucket's reservation sleeps its Delay
	if !s.b.Clock {
		period = day
	}
	lim := ratelimit.Limit{Algorithm: alg, Period: period, Threshold: 6}
	r := &ratelimit.Rule{Name: "reserve", Limits: []ratelimit.Limit{lim}}
	unit := ratelimit.Request{Name: r.Name, Key: "ada", Limits: r.Limits}
	if !s.b.Clock {
		s.run(t, func(e *env) {
			_, res := e.reserve(r, "ada", reserveUnits)
			e.check(res.got != nil, "a fresh key's reservation of %d units was denied", reserveUnits)
			e.settle(res, reserveUnits+delta)
			admitted := int64(0)
			for range lim.Threshold + 1 {
				if o := e.allow(unit); o.Decision.Allowed {
					admitted++
				}
			}
			want := lim.Threshold - reserveUnits - delta
			e.check(admitted == max(want, 0), "after a settle of %d of %d units reserved, %d unit calls admitted, want %d", reserveUnits+delta, reserveUnits, admitted, want)
		})
		return
	}
	s.settleSequence(t, lim, period, delta)
}

// settleSequence runs reservations of lim (of threshold at least
// reserveUnits) settled with delta more units than they took, between
// calls of a unit, while the clock moves by steps of about period.
func (s *suite) settleSequence(t *testing.T, lim ratelimit.Limit, period time.Duration, delta int64) {
	r := &ratelimit.Rule{Name: "reserve", Limits: []ratelimit.Limit{lim}}
	unit := ratelimit.Request{Name: r.Name, Key: "ada", Limits: r.Limits}
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for range calls / 2 {
			e.advance(step(rng, period))
			o, res := e.reserve(r, "ada", reserveUnits)
			c.add(o)
			if res.got != nil {
				e.advance(step(rng, period/4))
				e.settle(res, reserveUnits+delta)
			}
			e.advance(step(rng, period/4))
			c.addDecision(e.allow(unit))
			if s.caps.peek == "" {
				e.peek(r, "ada", nil)
			}
		}
		e.both(c)
	})
}

// slotWithRate: a rule of a limit of alg and a concurrency limit, whose
// calls take the slot and the rate limit all or nothing, hold it, and
// give it back by Release or Settle.
// With oc, overrides change the rate limit (an override never changes a
// concurrency limit).
func (s *suite) slotWithRate(t *testing.T, alg ratelimit.Algorithm, oc *overrideCase) {
	need(t, "hold concurrency slots (Rule.Reserve)", s.caps.slots)
	s.needClock(t)
	const period = 20 * time.Millisecond
	r := &ratelimit.Rule{Name: "slots", Limits: []ratelimit.Limit{
		limit(alg, period),
		{Algorithm: concurrency, Threshold: 2},
	}}
	var opts []ratelimit.Option
	if oc != nil {
		need(t, "apply overrides (ratelimit.WithOverrides)", s.caps.overrides)
		opts = append(opts, ratelimit.WithOverrides(parseOverrides(t, r.Name, *oc)))
	}
	s.slotSequence(t, r, period, opts...)
}

// slotSequence runs a sequence of reservations of r, which has a
// concurrency limit, on two keys: they take slots, give them back (by
// Release, or by Settle when s can settle), Peek and Reset, while the
// clock moves by steps of about period.
func (s *suite) slotSequence(t *testing.T, r *ratelimit.Rule, period time.Duration, opts ...ratelimit.Option) {
	s.run(t, func(e *env) {
		rng := rng(t)
		held := map[string][]reservations{}
		var c tally
		for i := range calls {
			e.advance(step(rng, period))
			key := keys[rng.IntN(2)]
			switch n := len(held[key]); {
			case n > 0 && rng.IntN(5) < 2:
				j := rng.IntN(n)
				if s.caps.reserve == "" && rng.IntN(2) == 0 {
					e.settle(held[key][j], rng.Int64N(3))
				} else {
					e.release(held[key][j])
				}
				held[key] = append(held[key][:j], held[key][j+1:]...)
			case s.caps.reset == "" && rng.IntN(15) == 0:
				e.reset(r.Name, key)
				for _, res := range held[key] {
					e.release(res) // the calls ran on; their give-back finds nothing
				}
				held[key] = nil
			default:
				o, res := e.reserve(r, key, 1+rng.Int64N(2))
				c.add(o)
				if res.got != nil {
					held[key] = append(held[key], res)
				}
			}
			if s.caps.peek == "" && i%3 == 0 {
				e.peek(r, key, nil)
			}
			if i == 0 {
				o := e.admit(r, key, nil, 1)
				e.check(o.Err == "invalid", "Rule.Check of a rule with a concurrency limit: %+v", o)
			}
		}
		for _, rs := range held {
			for _, res := range rs {
				e.release(res)
			}
		}
		e.both(c)
	}, opts...)
}

// concurrency runs the crosses of concurrency limits alone.
func (s *suite) concurrency(t *testing.T) {
	need(t, "hold concurrency slots (Rule.Reserve)", s.caps.slots)
	t.Run("hold_release/lease=30s", func(t *testing.T) {
		s.needClock(t)
		// The clock moves by up to 20 s a step, so leases end; their
		// renewal (every 10 s of real time) never comes in a run.
		s.slotSequence(t, &ratelimit.Rule{Name: "slots", Limits: []ratelimit.Limit{{Algorithm: concurrency, Threshold: 3}}}, 10*time.Second)
	})
	t.Run("held", func(t *testing.T) { s.slotsHeld(t) })
	t.Run("wait/release", func(t *testing.T) { s.slotWaitRelease(t) })
	t.Run("wait/deadline", func(t *testing.T) { s.slotWaitDeadline(t) })
	t.Run("keys_per_line", func(t *testing.T) { s.slotKeysPerLine(t) })
}

// slotKeysPerLine: a slot is taken, held and given back under one key, so
// a rule with a concurrency limit and a key per limit fails every call
// with ErrInvalidLimit, Reserve's and Check's alike, on both limiters, and
// takes no slot: the rule's lines under one key still hold theirs.
func (s *suite) slotKeysPerLine(t *testing.T) {
	r := &ratelimit.Rule{Name: "slots/lines", Limits: []ratelimit.Limit{
		{Algorithm: concurrency, Threshold: 1},
		{Algorithm: ratelimit.SlidingLog, Period: day, Threshold: 100},
	}, KeyExprs: []string{"user", ""}}
	s.run(t, func(e *env) {
		for range 3 {
			o := e.same("Reserve with a key per limit", func(l ratelimit.Limiter, _ bool) outcome {
				_, err := r.Reserve(e.ctx, l, 1, "ada", "")
				return outcomeOf(ratelimit.Admission{}, err)
			})
			e.check(o.Err == "invalid", "Reserve of a rule with a concurrency limit, with a key per limit: %+v", o)
			o = e.admitKeys(r, []string{"ada", ""}, 1)
			e.check(o.Err == "invalid", "Check of a rule with a concurrency limit, with a key per limit: %+v", o)
		}
		one := &ratelimit.Rule{Name: r.Name, Limits: r.Limits}
		o, res := e.reserve(one, "ada", 1)
		e.check(o.Err == "", "the slot, under one key, after the refused calls: %+v", o)
		e.release(res)
	})
}

// slotsHeld checks that no more calls than a concurrency limit's slots
// hold one at once, and that a slot given back is free.
func (s *suite) slotsHeld(t *testing.T) {
	r := &ratelimit.Rule{Name: "held", Limits: []ratelimit.Limit{{Algorithm: concurrency, Threshold: 3}}}
	s.run(t, func(e *env) {
		var held []*ratelimit.Reservation
		for i := range 5 {
			res, err := r.Reserve(e.ctx, e.got, 1, "tenant")
			if i < 3 {
				e.check(err == nil, "call %d of 3 slots: %v", i, err)
				held = append(held, res)
				continue
			}
			le := limitError(err)
			e.check(le != nil && le.Limit.Algorithm == concurrency, "call %d of 3 slots: %v", i, err)
			e.check(le.RetryAfter > 0 && le.RetryAfter <= 30*time.Second, "a slot's RetryAfter %s is not within its lease", le.RetryAfter)
		}
		res, err := r.Reserve(e.ctx, e.got, 1, "other")
		e.check(err == nil, "another key's slot: %v", err)
		e.check(res.Release(e.ctx) == nil, "Release")
		e.check(held[1].Release(e.ctx) == nil, "Release")
		res, err = r.Reserve(e.ctx, e.got, 1, "tenant")
		e.check(err == nil, "a slot given back is free: %v", err)
		_, err = r.Reserve(e.ctx, e.got, 1, "tenant")
		e.check(limitError(err) != nil, "the slots are full again: %v", err)
		for _, h := range append(held, res) {
			e.check(h.Release(e.ctx) == nil, "Release")
		}
	})
}

// slotWaitRelease: the call of a rule of one slot with a wait, made while
// another call holds the slot for a lease far longer than the wait
// (concurrency=1 wait=5s, the default lease of 30 s), waits for the slot,
// and the slot's give-back admits it.
func (s *suite) slotWaitRelease(t *testing.T) {
	r := &ratelimit.Rule{Name: "slot_wait", Limits: []ratelimit.Limit{{Algorithm: concurrency, Threshold: 1}}, Wait: 5 * time.Second}
	s.run(t, func(e *env) {
		holder, err := r.Reserve(e.ctx, e.got, 0, "tenant")
		e.check(err == nil, "the first call: %v", err)
		type result struct {
			res *ratelimit.Reservation
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := r.Reserve(e.ctx, e.got, 0, "tenant")
			done <- result{res, err}
		}()
		select {
		case w := <-done:
			// The slot is held: the call can only have returned denied.
			e.fatalf("a call of %s with a wait of %s returned while the slot was held, instead of waiting for it: %v", r.Limits[0], r.Wait, w.err)
		case <-time.After(100 * time.Millisecond):
		}
		e.check(holder.Release(e.ctx) == nil, "Release")
		w := <-done
		e.check(w.err == nil, "the waiting call was not admitted when the slot was given back: %v", w.err)
		e.check(w.res.Release(e.ctx) == nil, "Release")
	})
}

// slotWaitDeadline: a call waiting for a slot that nobody gives back is
// denied for the slot once its wait is over, not before.
func (s *suite) slotWaitDeadline(t *testing.T) {
	r := &ratelimit.Rule{Name: "slot_deadline", Limits: []ratelimit.Limit{{Algorithm: concurrency, Threshold: 1}}, Wait: 100 * time.Millisecond}
	s.run(t, func(e *env) {
		holder, err := r.Reserve(e.ctx, e.got, 0, "tenant")
		e.check(err == nil, "the first call: %v", err)
		began := time.Now()
		_, err = r.Reserve(e.ctx, e.got, 0, "tenant")
		waited := time.Since(began)
		le := limitError(err)
		e.check(le != nil && le.Limit.Algorithm == concurrency, "a call waiting for a held slot: %v", err)
		e.check(waited >= r.Wait, "the call was denied after %s, before its wait of %s was over", waited, r.Wait)
		e.check(holder.Release(e.ctx) == nil, "Release")
	})
}

// settleCancelled: a reservation settled, and a slot given back, by a
// caller whose context is cancelled (a client that disconnected as the
// answer arrived) is refunded and freed all the same: Settle and Release
// run on a context detached from the caller's cancellation.
func (s *suite) settleCancelled(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	lim := ratelimit.Limit{Algorithm: alg, Period: day, Threshold: 6}
	rules := []*ratelimit.Rule{{Name: "settle_cancelled", Limits: []ratelimit.Limit{lim}}}
	if s.caps.slots == "" {
		rules = append(rules, &ratelimit.Rule{Name: "settle_cancelled_slot", Limits: []ratelimit.Limit{lim, {Algorithm: concurrency, Threshold: 1}}})
	}
	for _, r := range rules {
		s.run(t, func(e *env) {
			_, res := e.reserve(r, "ada", reserveUnits)
			e.check(res.got != nil, "%s: a fresh key's reservation of %d units was denied", r.Name, reserveUnits)
			cancelled, cancel := context.WithCancel(e.ctx)
			cancel()
			for _, v := range []*ratelimit.Reservation{res.got, res.want} {
				if v != nil {
					err := v.Settle(cancelled, 0)
					e.check(err == nil, "%s: Settle(0) with a cancelled context: %v", r.Name, err)
				}
			}
			// A leaky bucket paces: its calls are checked by Allow, which
			// does not wait for their turn.
			unit := ratelimit.Request{Name: r.Name, Key: "ada", Limits: []ratelimit.Limit{lim}}
			admitted := int64(0)
			for range lim.Threshold + 1 {
				if o := e.allow(unit); o.Decision.Allowed {
					admitted++
				}
			}
			e.check(admitted == lim.Threshold, "%s: after a settle at 0 on a cancelled context, %d unit calls admitted, want %d (the refund was lost)", r.Name, admitted, lim.Threshold)
			if len(r.Limits) == 2 {
				o, again := e.reserve(&ratelimit.Rule{Name: r.Name, Limits: []ratelimit.Limit{{Algorithm: concurrency, Threshold: 1}}}, "ada", 1)
				e.check(again.got != nil, "%s: the slot given back on a cancelled context is still held: %+v", r.Name, o)
				e.release(again)
			}
		})
	}
}
