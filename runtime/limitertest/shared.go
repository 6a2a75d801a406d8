package limitertest

import (
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// sharedRules returns three rules that share the line "shared/line" (a
// sliding log of 8 calls per 2×period that counts every call as one): two
// with their own line of alg per period keyed by the user, the shared line
// being limit 1 of the first, and limit 2 of the second, after a second
// own line, so its state must not depend on its index; and one whose only
// limit is the shared line.
func sharedRules(alg ratelimit.Algorithm, period time.Duration) (a, b, c *ratelimit.Rule) {
	return sharedRulesOf(limit(alg, period), period)
}

// sharedRulesOf is sharedRules with own, of about period, as the users'
// own lines.
func sharedRulesOf(own ratelimit.Limit, period time.Duration) (a, b, c *ratelimit.Rule) {
	line := ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Period: 2 * period, Threshold: 8}
	a = &ratelimit.Rule{
		Name:     "shared/a",
		Limits:   []ratelimit.Limit{own, line},
		KeyExprs: []string{"user", ""},
		Shared:   []string{"", "shared/line"},
	}
	b = &ratelimit.Rule{
		Name:     "shared/b",
		Limits:   []ratelimit.Limit{own, {Algorithm: ratelimit.SlidingLog, Period: period, Threshold: 100}, line},
		KeyExprs: []string{"user", "", ""},
		Shared:   []string{"", "", "shared/line"},
	}
	c = &ratelimit.Rule{Name: "shared/c", Limits: []ratelimit.Limit{line}, KeyExprs: []string{""}, Shared: []string{"shared/line"}}
	return a, b, c
}

// sharedLine: three rules with a shared line spend one budget, all or
// nothing: together they admit exactly the shared line's threshold (the
// users' own lines admitting more), a denied call charges no line, and
// each user's own line stays its rule's.
func (s *suite) sharedLine(t *testing.T, alg ratelimit.Algorithm, cost int64) {
	period := 20 * time.Millisecond
	if !s.b.Clock {
		period = day
	}
	s.sharedLineOf(t, limit(alg, period), period, cost)
}

// sharedLineOf is sharedLine with own, of about period, as the users' own
// lines.
func (s *suite) sharedLineOf(t *testing.T, own ratelimit.Limit, period time.Duration, cost int64) {
	need(t, "decide shared lines (ratelimit.Abilities.SharesLines)", s.caps.shared)
	a, b, c := sharedRulesOf(own, period)
	s.run(t, func(e *env) {
		shared := a.Limits[1].Threshold / cost * cost
		admitted := int64(0)
		for i, user := range []string{"ada", "grace", "edsger", "barbara", "alan", "ada", "grace"} {
			for _, r := range []*ratelimit.Rule{a, b, c} {
				keys := make([]string, len(r.Limits))
				if r != c {
					keys[0] = user
				}
				var o outcome
				if s.b.Clock {
					o = e.admit(r, "", keys, cost)
				} else {
					o = outcomeOf(r.Admit(e.ctx, e.got, cost, keys...))
				}
				e.check(o.Err == "" || o.Err == "limited", "%s by %s: %s", r.Name, user, o.Err)
				if o.Err == "" {
					admitted += cost
				}
				if s.b.Clock && s.caps.peek == "" && i%2 == 0 {
					e.peek(r, "", keys)
				}
			}
		}
		e.check(admitted == shared, "three rules sharing a line of %d units admitted %d", shared, admitted)
		// The line is spent: a fresh user is denied by it, in either rule.
		o := outcomeOf(b.Admit(e.ctx, e.got, cost, "fresh", "", ""))
		e.check(o.Err == "limited" && o.Denial.Limit == b.Limits[2], "a fresh user on a spent shared line: %+v", o)
	})
}

// sharedLineReserve: reservations with a key per limit take the user's own
// line and the shared line together; a refund gives both back and a
// settle changes both, all or nothing: after a reservation of 2 units
// refunded and one of 2 settled at 3, the shared line of 8 admits 5 more
// units, and the refunded user's own line all of its threshold.
func (s *suite) sharedLineReserve(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "decide shared lines (ratelimit.Abilities.SharesLines)", s.caps.shared)
	need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	a, _, c := sharedRules(alg, day)
	s.run(t, func(e *env) {
		o, refunded := e.reserveKeys(a, []string{"ada", ""}, 2)
		e.check(refunded.got != nil, "a reservation of 2 on a fresh shared line was denied: %+v", o)
		o, settled := e.reserveKeys(c, []string{""}, 2)
		e.check(settled.got != nil, "a second reservation of 2 was denied: %+v", o)
		e.refund(refunded)
		e.settle(settled, 3)
		admitted := int64(0)
		for range 8 {
			if o := e.admit(c, "", []string{""}, 1); o.Err == "" {
				admitted++
			}
		}
		e.check(admitted == 5, "the shared line admitted %d units after a refund of 2 and a settle at 3, want 5", admitted)
		own := ratelimit.Request{Name: a.Name, Key: "ada", Limits: a.Limits[:1]}
		left := int64(0)
		for range a.Limits[0].Threshold + 1 {
			if o := e.allow(own); o.Decision.Allowed {
				left++
			}
		}
		e.check(left == a.Limits[0].Threshold, "ada's own line admitted %d after its refund, want %d", left, a.Limits[0].Threshold)
	})
}
