package limitertest

import (
	"fmt"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// adjustKeys: OpAdjust of a request with a key per limit (and, on
// a backend that decides shared lines, a shared line among them) changes
// each limit under its own key, where a decision keeps it: after a call of
// 2 units and an Adjust of 3 more, a Peek of each limit's key with fresh
// keys for the others tells that limit 5 units used, and one of fresh
// keys tells none; with Backend.Clock, an Adjust of -5 at the call's
// time then gives all 5 back to every key.
func (s *suite) adjustKeys(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "settle reservations (ratelimit.OpReserve)", s.caps.reserve)
	need(t, "peek (ratelimit.Peek)", s.caps.peek)
	lim := ratelimit.Limit{Algorithm: alg, Period: 24 * time.Hour, Threshold: 10}
	req := ratelimit.Request{Name: "adjust_keys", Cost: 2, Limits: []ratelimit.Limit{lim, lim}, Keys: []string{"ada", "acme"}}
	if s.caps.shared == "" {
		req.Limits = append(req.Limits, lim)
		req.Keys = append(req.Keys, "eu")
		req.Shared = []string{"", "", "adjust_keys/line"}
	}
	// of returns req with limit i's key and fresh keys for the others.
	of := func(i int) ratelimit.Request {
		r := req
		r.Cost, r.Keys = 1, make([]string, len(req.Keys))
		for j := range r.Keys {
			r.Keys[j] = fmt.Sprintf("fresh %d", j)
		}
		if i >= 0 {
			r.Keys[i] = req.Keys[i]
		}
		return r
	}
	s.run(t, func(e *env) {
		at := time.Now()
		if e.clock != nil {
			at = e.clock.Now()
		}
		o := e.allow(req)
		e.check(o.Err == "" && o.Decision.Allowed, "a fresh call of 2 units: %+v", o)
		adjust := func(delta int64) {
			e.same(fmt.Sprintf("Adjust(keys %q, %d)", req.Keys, delta), func(l ratelimit.Limiter, _ bool) outcome {
				e.check(can(l, ratelimit.OpAdjust), "%T carries out no OpAdjust", l)
				return decisionOutcome(ratelimit.Decision{}, adjustOn(e.ctx, l, req, at, delta))
			})
		}
		peek := func(i int) ratelimit.Decision {
			o := e.same(fmt.Sprintf("Peek(limit %d's key)", i), func(l ratelimit.Limiter, _ bool) outcome {
				return decisionOutcome(ratelimit.Peek(e.ctx, l, of(i)))
			})
			e.check(o.Err == "", "Peek of limit %d's key: %s", i, o.Err)
			return o.Decision
		}
		adjust(3)
		fresh := peek(-1)
		e.check(fresh.Allowed, "a Peek of fresh keys denies: %+v", fresh)
		for i := range req.Limits {
			d := peek(i)
			e.check(d.LimitIndex == i && d.Remaining == fresh.Remaining-5,
				"limit %d (key %q) after 2 units and an Adjust of 3: remaining %d at limit %d, want %d at limit %d (fresh keys: %d)",
				i, req.Keys[i], d.Remaining, d.LimitIndex, fresh.Remaining-5, i, fresh.Remaining)
		}
		if e.clock == nil {
			return // a refund needs the call's time, which only the clock tells exactly
		}
		adjust(-5)
		for i := range req.Limits {
			d := peek(i)
			e.check(d.Remaining == fresh.Remaining, "limit %d (key %q) after an Adjust of -5: remaining %d, want %d", i, req.Keys[i], d.Remaining, fresh.Remaining)
		}
	})
}
