package limitertest

import (
	"context"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// perCallLimits returns a rule's limits of alg of the given period: one
// that counts calls (3 a period, ratelimit.Limit.PerCall) and one that
// takes their cost (10 units a period), as "requests and tokens per
// minute" are.
func perCallLimits(alg ratelimit.Algorithm, period time.Duration) []ratelimit.Limit {
	return perCallOf(ratelimit.Limit{Algorithm: alg, Period: period})
}

// perCallOf returns lim twice: as a limit that counts calls (3 a period,
// ratelimit.Limit.PerCall) and as one that takes their cost (10 units a
// period).
func perCallOf(lim ratelimit.Limit) []ratelimit.Limit {
	calls, units := lim, lim
	calls.Threshold, calls.PerCall = 3, true
	units.Threshold, units.PerCall = 10, false
	return []ratelimit.Limit{calls, units}
}

// perCall: a rule of a limit of alg that counts calls and one that takes
// their cost, decided all or nothing, by Allow with one key and with a
// key per limit, and by Reserve, whose Settle leaves the calls' limit as
// it is. (Allow, not Admit: a leaky bucket's Admit would sleep its Delay.
// A leaky bucket's reservations are left out for that reason.)
func (s *suite) perCall(t *testing.T, alg ratelimit.Algorithm) {
	reserve := s.caps.reserve == "" && !factsOf(alg).Paces
	if !s.b.Clock {
		s.perCallInvariants(t, alg, reserve)
		return
	}
	const period = 100 * time.Millisecond
	s.perCallSequence(t, perCallLimits(alg, period), period, reserve)
}

// perCallSequence is perCall's sequence of a rule of limits (as
// perCallOf makes them), the clock moving by steps of about period;
// reserve tells whether some calls are made by Rule.Reserve and settled.
func (s *suite) perCallSequence(t *testing.T, limits []ratelimit.Limit, period time.Duration, reserve bool) {
	r := &ratelimit.Rule{Name: "per_call", Limits: limits}
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for range calls {
			e.advance(step(rng, period))
			key := keys[rng.IntN(2)]
			cost := 1 + rng.Int64N(6)
			req := ratelimit.Request{Name: r.Name, Key: key, Cost: cost, Limits: r.Limits}
			switch rng.IntN(4) {
			case 0:
				req.Keys = []string{key, "all"}
				c.addDecision(e.allow(req))
			case 1:
				if !reserve {
					c.addDecision(e.allow(req))
					break
				}
				o, res := e.reserve(r, key, cost)
				c.add(o)
				if res.got != nil {
					e.advance(step(rng, period/4))
					e.settle(res, rng.Int64N(cost+3))
				}
			default:
				c.addDecision(e.allow(req))
			}
			if s.caps.peek == "" {
				e.peek(r, key, nil)
			}
		}
		e.both(c)
	})
}

// perCallInvariants checks, without a controllable clock, that a fresh
// key's calls take 1 of the calls' limit and their cost of the other: a
// call of 7 units after one of 4 is denied by the units and charges
// neither limit, a settle gives back units only, and the fourth call is
// denied by the calls' limit with units to spare.
func (s *suite) perCallInvariants(t *testing.T, alg ratelimit.Algorithm, reserve bool) {
	r := &ratelimit.Rule{Name: "per_call", Limits: perCallLimits(alg, day)}
	s.run(t, func(e *env) {
		allow := func(cost int64, want bool, index int) {
			o := e.allow(ratelimit.Request{Name: r.Name, Key: "ada", Cost: cost, Limits: r.Limits})
			d := o.Decision
			e.check(o.Err == "", "a call of %d units: %s", cost, o.Err)
			e.check(d.Allowed == want, "a call of %d units: allowed %v, want %v: %+v", cost, d.Allowed, want, d)
			e.check(want || d.LimitIndex == index, "a call of %d units was denied by limit %d, want %d: %+v", cost, d.LimitIndex, index, d)
		}
		allow(4, true, 0)
		allow(7, false, 1) // 4 + 7 > 10 units: 1 call and 4 units charged
		if reserve {
			_, res := e.reserve(r, "ada", 6) // 2 calls, 10 units
			e.check(res.got != nil, "a reservation of 6 units was denied")
			allow(1, false, 1)
			e.settle(res, 1) // 2 calls, 5 units
		} else {
			allow(1, true, 0) // 2 calls, 5 units
		}
		allow(4, true, 0) // 3 calls, 9 units
		allow(1, false, 0)
	})
}

// refund: Reservation.Refund gives back all a reservation took, on the
// limit that counts calls as on the one that takes the cost, on a
// context already cancelled: a fresh key then admits its 3 calls of 3
// units, as if the refunded call had not been made.
func (s *suite) refund(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	r := &ratelimit.Rule{Name: "refund", Limits: perCallLimits(alg, day)}
	s.run(t, func(e *env) {
		_, res := e.reserve(r, "ada", 6)
		e.check(res.got != nil, "a fresh key's reservation of 6 units was denied")
		cancelled, cancel := context.WithCancel(e.ctx)
		cancel()
		for _, v := range []*ratelimit.Reservation{res.got, res.want} {
			if v != nil {
				err := v.Refund(cancelled)
				e.check(err == nil, "Refund with a cancelled context: %v", err)
				e.check(v.Refund(e.ctx) != nil, "a second Refund succeeded")
			}
		}
		for i := range 4 {
			o := e.allow(ratelimit.Request{Name: r.Name, Key: "ada", Cost: 3, Limits: r.Limits})
			want := i < 3
			e.check(o.Err == "" && o.Decision.Allowed == want, "call %d of 3 units after a refund: allowed %v, want %v: %+v", i, o.Decision.Allowed, want, o)
		}
	})
}

// onlyFailures: a rule that counts only failures (OnlyFailures) admits
// its calls while the failures so far leave room, however many run at
// once: three times its threshold held at once are all admitted and,
// refunded (successes), leave its limit as it was; failures settled one
// by one fill it, a per-call limit with the cost's, and the call after
// the last is denied.
func (s *suite) onlyFailures(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	need(t, "peek (Peek)", s.caps.peek)
	r := &ratelimit.Rule{Name: "failures", Limits: perCallLimits(alg, day), OnlyFailures: true}
	const threshold = 3 // perCallLimits: 3 calls, 9 units
	s.run(t, func(e *env) {
		var held []reservations
		for i := range 3 * threshold {
			_, res := e.reserve(r, "ada", 2)
			e.check(res.got != nil, "call %d in flight, no failure yet, was denied", i)
			held = append(held, res)
		}
		for _, res := range held {
			e.refund(res)
		}
		for i := range threshold {
			_, res := e.reserve(r, "ada", 2)
			e.check(res.got != nil, "a call after %d failures of %d was denied", i, threshold)
			e.settle(res, res.got.Units())
		}
		o, res := e.reserve(r, "ada", 2)
		e.check(res.got == nil && o.Err == "limited", "a call after %d failures of %d was not denied: %+v", threshold, threshold, o)
	})
}
