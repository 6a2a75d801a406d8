package limitertest

import (
	"fmt"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// calendarCrosses runs the crosses of a fixed window of calendar period
// cal in zone tz beyond its sequences: several limits (all or nothing
// with a sliding log and a fixed window of rolling periods), a limit
// that counts calls beside one that takes their cost (per_call), shared
// lines (a calendar line of each user beside a line shared by three
// rules), Peek and Reset, overrides in calendar terms, and waits, each the way of
// waitWays: a denial retried at the period's end is beyond a wait of
// 50ms and returns at once; one 30ms before the period's end waits and is
// admitted. span is about a third of the period.
func (s *suite) calendarCrosses(t *testing.T, cal, tz string, span time.Duration) {
	cross := fmt.Sprintf("calendar=%s/tz=%s", cal, tz)
	lim := ratelimit.Limit{Calendar: cal, TZ: tz, Threshold: 5}
	needCalendar := func(t *testing.T) {
		need(t, "decide calendar periods", s.caps.calendar)
		s.needClock(t)
	}
	for _, cost := range costs {
		t.Run(name(cross+"/several_limits", cost), func(t *testing.T) {
			needCalendar(t)
			s.sequence(t, []ratelimit.Limit{
				lim,
				{Algorithm: ratelimit.SlidingLog, Period: 2 * span, Threshold: 12},
				{Algorithm: ratelimit.FixedWindow, Period: span / 2, Threshold: 4},
			}, span, cost)
		})
	}
	t.Run(cross+"/per_call", func(t *testing.T) {
		needCalendar(t)
		s.perCallSequence(t, perCallOf(lim), span, s.caps.reserve == "")
	})
	for _, cost := range costs {
		t.Run(name(cross+"/shared_line", cost), func(t *testing.T) {
			needCalendar(t)
			s.sharedLineOf(t, lim, span, cost)
		})
	}
	t.Run(cross+"/peek_reset", func(t *testing.T) {
		needCalendar(t)
		need(t, "peek (ratelimit.Peek)", s.caps.peek)
		need(t, "reset (ratelimit.Reset)", s.caps.reset)
		s.peekSequence(t, &ratelimit.Rule{Name: "peek", Limits: []ratelimit.Limit{lim}}, span)
	})
	for _, o := range calendarOverrideCases(cal, tz) {
		t.Run(cross+"/overrides/"+o.name, func(t *testing.T) {
			needCalendar(t)
			s.overridesOf(t, lim, span, o, false)
		})
		t.Run(cross+"/keys_per_line/overrides/"+o.name, func(t *testing.T) {
			needCalendar(t)
			s.overridesOf(t, lim, span, o, true)
		})
	}
	for _, way := range waitWays {
		prefix := cross + "/"
		if way != "check" {
			prefix += way + "/"
		}
		t.Run(prefix+"wait/beyond_budget", func(t *testing.T) {
			needCalendar(t)
			s.waitBeyondBudgetOf(t, waitRuleOf(lim, span, 50*time.Millisecond, way), way)
		})
		t.Run(prefix+"wait/at_period_end", func(t *testing.T) {
			needCalendar(t)
			s.waitAtPeriodEnd(t, waitRuleOf(lim, span, time.Minute, way), way)
		})
	}
}

// calendarOverrideCases are overrideCases in calendar terms for a rule
// whose limit is of calendar period cal in zone tz: the rule's override
// of the same period, a key's of another calendar period, a tier's, and
// the two words.
func calendarOverrideCases(cal, tz string) []overrideCase {
	other := map[string]string{"day": "week", "week": "day", "month": "day", "year": "month"}[cal]
	of := func(period string, threshold int) string {
		return fmt.Sprintf("period=%s tz=%s threshold=%d", period, tz, threshold)
	}
	return []overrideCase{
		{"rule", map[string]string{"RULE": of(cal, 3)}},
		{"key", map[string]string{"RULE": of(cal, 3), "RULE|key=ada": of(other, 2)}},
		{"tier", map[string]string{
			"RULE|tier=gold": of(cal, 8), "RULE|key=ada": "tier=gold", "RULE|key=grace": "tier=gold",
			"RULE|key=edsger": of(other, 2),
		}},
		{"unlimited", map[string]string{"RULE|key=ada": "unlimited"}},
		{"block", map[string]string{"RULE|key=ada": "block", "RULE": of(cal, 4)}},
	}
}

// waitAtPeriodEnd: on each limiter in turn, a call of r (made the way
// way) denied 30ms before its calendar period ends, with a wait of a
// minute, waits for the period's end and is admitted then, on the clock
// running at real speed.
func (s *suite) waitAtPeriodEnd(t *testing.T, r *ratelimit.Rule, way string) {
	if way == "reserve" {
		need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	}
	const before = 30 * time.Millisecond
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			d, err := l.limiter.Allow(e.ctx, callOf(r, l.name, r.Limits[0].MaxCost()))
			e.check(err == nil && d.Allowed, "%s: a fresh key was not admitted its limit's MaxCost: %+v, %v", l.name, d, err)
			d, err = l.limiter.Allow(e.ctx, callOf(r, l.name, 1))
			e.check(err == nil && !d.Allowed && d.RetryAfter > before, "%s: the filled limit: %+v, %v", l.name, d, err)
			e.advance(d.RetryAfter - before)
			asked := time.Now()
			e.whileRunning(func() { err = e.wait(r, l.limiter, l.name, way) })
			waited := time.Since(asked)
			e.check(err == nil, "%s: a call denied %s before its period's end, with a wait of %s, was not admitted: %v", l.name, before, r.Wait, err)
			// As in waitAdmitted, a millisecond of slack for a backend's
			// own reading of the time.
			e.check(waited > before-time.Millisecond, "%s: the call was admitted after %s, before its period ended (%s)", l.name, waited, before)
		}
	})
}
