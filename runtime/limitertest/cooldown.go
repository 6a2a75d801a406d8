package limitertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// cooldownSpan is how long the crosses' lines cool: long enough that a
// backend without a controllable clock still sees them cool.
const cooldownSpan = time.Minute

// cooldown runs the crosses of cooldowns (ratelimit.OpCool), or, for a
// backend that keeps none, cooldown/unsupported: Rule.Cooldown fails with
// errors.ErrUnsupported and calls are decided without cooldowns.
func (s *suite) cooldown(t *testing.T) {
	if s.caps.cooldown != "" {
		t.Run("unsupported", func(t *testing.T) { s.coolUnsupported(t) })
		return
	}
	for _, alg := range ratelimit.Algorithms() {
		if s.caps.algorithms[alg] != "" {
			continue
		}
		t.Run(string(alg)+"/several_lines", func(t *testing.T) { s.coolSeveralLines(t, alg) })
	}
	t.Run("keys_per_line", func(t *testing.T) { s.coolKeysPerLine(t) })
	t.Run("shared_line", func(t *testing.T) { s.coolSharedLine(t) })
	t.Run("peek", func(t *testing.T) { s.coolPeek(t) })
	t.Run("reserve", func(t *testing.T) { s.coolReserve(t) })
	t.Run("wait/admitted", func(t *testing.T) { s.coolWaitAdmitted(t) })
	t.Run("wait/beyond_budget", func(t *testing.T) { s.coolWaitBeyondBudget(t) })
}

// cool is Rule.Cooldown of r's line with key for d on both limiters.
func (e *env) cool(r *ratelimit.Rule, line int, key string, d time.Duration) {
	o := e.same(fmt.Sprintf("%s Cooldown(line %d, key %q, %s)", r.Name, line, key, d), func(l ratelimit.Limiter, _ bool) outcome {
		return decisionOutcome(ratelimit.Decision{}, r.Cooldown(e.ctx, l, line, key, d))
	})
	e.check(o.Err == "", "Cooldown(line %d, key %q, %s): %s", line, key, d, o.Err)
}

// cooled requires o to be a denial by limit i of limits while it cools
// for at most left (and, within a second, about that long), charging
// nothing.
func (e *env) cooled(o outcome, limits []ratelimit.Limit, i int, left time.Duration) {
	e.check(o.Err == "limited", "a call of a cooling line: %+v", o)
	e.check(o.Decision == (ratelimit.Decision{}) || o.Decision.Source == ratelimit.SourceCooldown, "the decision's source: %+v", o.Decision)
	e.check(o.Denial.Limit == limits[i], "denied by %v, not the cooling limit %v", o.Denial.Limit, limits[i])
	e.check(o.Denial.RetryAfter <= left && o.Denial.RetryAfter > left-time.Second, "RetryAfter %s, want the cooldown's end, %s", o.Denial.RetryAfter, left)
	e.check(o.Denial.Remaining == 0, "Remaining %d while cooling", o.Denial.Remaining)
}

// coolSeveralLines: a rule of alg with a line that cools beside one that
// does not. A cooled key's calls are denied by the cooling line, with
// the cooldown's end as RetryAfter, and charge nothing (either line);
// other keys are decided as ever; a shorter cooldown never shortens a
// longer one, a longer one extends it; the key keeps every unit it had.
func (s *suite) coolSeveralLines(t *testing.T, alg ratelimit.Algorithm) {
	limits := []ratelimit.Limit{
		{Algorithm: alg, Period: time.Hour, Threshold: 4},
		{Algorithm: alg, Period: time.Hour, Threshold: 6, Cooldown: true},
	}
	if windowed(alg) {
		limits[0].Period, limits[1].Period = 24*time.Hour, 24*time.Hour
	}
	r := &ratelimit.Rule{Name: "cooldown/" + string(alg), Limits: limits}
	s.run(t, func(e *env) {
		o := e.allow(ratelimit.Request{Name: r.Name, Key: "ada", Limits: r.Limits}) // charges 1 of each
		e.check(o.Err == "" && o.Decision.Allowed, "a fresh key: %+v", o)
		e.cool(r, 1, "ada", cooldownSpan)
		for range 3 {
			e.cooled(e.admit(r, "ada", nil, 1), r.Limits, 1, cooldownSpan)
		}
		o = e.admit(r, "grace", nil, 1)
		e.check(o.Err == "", "another key is admitted while ada cools: %+v", o)
		e.cool(r, 1, "ada", time.Second) // sooner: changes nothing
		e.cooled(e.admit(r, "ada", nil, 1), r.Limits, 1, cooldownSpan)
		e.cool(r, 1, "ada", 2*cooldownSpan) // later: extends it
		e.cooled(e.admit(r, "ada", nil, 1), r.Limits, 1, 2*cooldownSpan)
		e.cool(r, 1, "ada", 10*ratelimit.MaxCooldown) // capped
		e.cooled(e.admit(r, "ada", nil, 1), r.Limits, 1, ratelimit.MaxCooldown)
		// The line's state is the rule's whatever its cooldown: the
		// limits without it see what the cooldown's denials left.
		plain := ratelimit.Request{Name: r.Name, Key: "ada", Cost: 3, Limits: []ratelimit.Limit{limits[0], limits[1]}}
		plain.Limits[1].Cooldown = false
		o = e.allow(plain)
		e.check(o.Err == "" && o.Decision.Allowed, "ada's 3 units left, asked without the cooldown: %+v", o)
		plain.Cost = 1
		o = e.allow(plain)
		e.check(o.Err == "" && !o.Decision.Allowed && o.Decision.LimitIndex == 0, "the cooldown's denials charged nothing, yet the limit holds: %+v", o)
	})
}

// coolKeysPerLine: a rule with a key per limit. A cooled line that
// counts every call as one (key "") denies every user; a cooled user's
// line denies that user only.
func (s *suite) coolKeysPerLine(t *testing.T) {
	r := &ratelimit.Rule{
		Name: "cooldown/keys_per_line",
		Limits: []ratelimit.Limit{
			{Period: time.Hour, Threshold: 5, Cooldown: true},
			{Period: time.Hour, Threshold: 50, Cooldown: true},
		},
		KeyExprs: []string{"user", ""},
	}
	s.run(t, func(e *env) {
		e.check(e.admitKeys(r, []string{"ada", ""}, 1).Err == "", "ada, fresh")
		e.cool(r, 0, "ada", cooldownSpan)
		e.cooled(e.admitKeys(r, []string{"ada", ""}, 1), r.Limits, 0, cooldownSpan)
		e.check(e.admitKeys(r, []string{"grace", ""}, 1).Err == "", "grace, while ada cools")
		e.cool(r, 1, "", 2*cooldownSpan)
		for _, user := range []string{"ada", "grace", "linus"} {
			// The org-wide line cools longest: it names the denial.
			e.cooled(e.admitKeys(r, []string{user, ""}, 1), r.Limits, 1, 2*cooldownSpan)
		}
		e.cooled(e.peek(r, "", []string{"linus", ""}).asDenial(r.Limits), r.Limits, 1, 2*cooldownSpan)
	})
}

// coolSharedLine: a cooled shared line denies the calls of every rule
// that shares it.
func (s *suite) coolSharedLine(t *testing.T) {
	need(t, "share lines between rules", s.caps.shared)
	line := ratelimit.Limit{Period: time.Hour, Threshold: 100, Cooldown: true}
	rules := make([]*ratelimit.Rule, 2)
	for i := range rules {
		rules[i] = &ratelimit.Rule{
			Name:     fmt.Sprintf("cooldown/shared/%d", i),
			Limits:   []ratelimit.Limit{{Period: time.Hour, Threshold: 5}, line},
			KeyExprs: []string{"user", ""},
			Shared:   []string{"", "cooldown/provider"},
		}
	}
	s.run(t, func(e *env) {
		e.check(e.admitKeys(rules[0], []string{"ada", ""}, 1).Err == "", "ada, fresh")
		e.cool(rules[0], 1, "", cooldownSpan)
		for _, r := range rules {
			e.cooled(e.admitKeys(r, []string{"ada", ""}, 1), r.Limits, 1, cooldownSpan)
		}
	})
}

// asDenial turns the outcome of a Peek that denied into a denial's, for
// cooled: its LimitError is the one a call would get.
func (o outcome) asDenial(limits []ratelimit.Limit) outcome {
	if o.Err != "" || o.Decision.Allowed {
		return o
	}
	d := o.Decision
	o.Err = "limited"
	o.Denial = ratelimit.LimitError{Remaining: d.Remaining, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
	if d.LimitIndex >= 0 && d.LimitIndex < len(limits) {
		o.Denial.Limit = limits[d.LimitIndex]
	}
	return o
}

// coolPeek: Rule.Peek of a cooling key tells the cooldown's denial, and
// once it ends (on the clock) that the key has all its units.
func (s *suite) coolPeek(t *testing.T) {
	need(t, "peek (ratelimit.Peek)", s.caps.peek)
	r := &ratelimit.Rule{Name: "cooldown/peek", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3, Cooldown: true}}}
	s.run(t, func(e *env) {
		o := e.peek(r, "ada", nil)
		e.check(o.Err == "" && o.Decision.Allowed && o.Decision.Remaining == 3, "a fresh key's Peek: %+v", o)
		e.cool(r, 0, "ada", cooldownSpan)
		o = e.peek(r, "ada", nil)
		e.check(o.Decision.Source == ratelimit.SourceCooldown, "Peek of a cooling key: %+v", o)
		e.cooled(o.asDenial(r.Limits), r.Limits, 0, cooldownSpan)
		if e.clock == nil {
			return
		}
		e.advance(cooldownSpan)
		o = e.peek(r, "ada", nil)
		e.check(o.Err == "" && o.Decision.Allowed && o.Decision.Remaining == 3, "Peek once cooled: %+v", o)
	})
}

// coolReserve: Rule.Reserve of a cooling key is denied, charging nothing
// and taking no slot, for a rule with a concurrency limit too.
func (s *suite) coolReserve(t *testing.T) {
	need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	rate := &ratelimit.Rule{Name: "cooldown/reserve", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3, Cooldown: true}}}
	s.run(t, func(e *env) {
		e.cool(rate, 0, "ada", cooldownSpan)
		o, _ := e.reserve(rate, "ada", 2)
		e.cooled(o, rate.Limits, 0, cooldownSpan)
		o, res := e.reserve(rate, "grace", 2)
		e.check(o.Err == "", "grace, while ada cools: %+v", o)
		e.settle(res, 1)
	})
	if s.caps.slots != "" {
		return
	}
	slot := &ratelimit.Rule{Name: "cooldown/slot", Limits: []ratelimit.Limit{
		{Algorithm: "concurrency", Threshold: 1},
		{Period: time.Hour, Threshold: 3, Cooldown: true},
	}}
	s.run(t, func(e *env) {
		e.cool(slot, 1, "ada", cooldownSpan)
		o, _ := e.reserve(slot, "ada", 1)
		e.cooled(o, slot.Limits, 1, cooldownSpan)
		o, res := e.reserve(slot, "grace", 1)
		e.check(o.Err == "", "grace, while ada cools: %+v", o)
		e.release(res)
		if e.clock == nil {
			return
		}
		e.advance(cooldownSpan)
		o, res = e.reserve(slot, "ada", 1)
		e.check(o.Err == "", "ada once cooled: the cooldown's denial took no slot: %+v", o)
		e.release(res)
	})
}

// coolWaitAdmitted: a call of a rule with Wait made while its key cools
// for less than the wait waits for the cooldown's end and is admitted
// (in real time).
func (s *suite) coolWaitAdmitted(t *testing.T) {
	const span = 100 * time.Millisecond
	r := &ratelimit.Rule{Name: "cooldown/wait", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3, Cooldown: true}}, Wait: time.Minute}
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			e.check(r.Cooldown(e.ctx, l.limiter, 0, l.name, span) == nil, "%s: Cooldown", l.name)
			asked := time.Now()
			var err error
			e.whileRunning(func() { err = r.Check(e.ctx, l.limiter, 1, l.name) })
			waited := time.Since(asked)
			e.check(err == nil, "%s: a call that cools for %s with a wait of %s: %v", l.name, span, r.Wait, err)
			e.check(waited > span-10*time.Millisecond, "%s: admitted after %s, before the cooldown ended (%s)", l.name, waited, span)
		}
	})
}

// coolWaitBeyondBudget: a call whose key cools for longer than the
// rule's wait is denied at once, with the cooldown's end.
func (s *suite) coolWaitBeyondBudget(t *testing.T) {
	r := &ratelimit.Rule{Name: "cooldown/wait_beyond", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3, Cooldown: true}}, Wait: 50 * time.Millisecond}
	s.run(t, func(e *env) {
		e.cool(r, 0, "ada", cooldownSpan)
		asked := time.Now()
		e.cooled(e.admit(r, "ada", nil, 1), r.Limits, 0, cooldownSpan)
		e.check(time.Since(asked) < 30*time.Second, "the call waited %s for a cooldown beyond its wait", time.Since(asked))
	})
}

// coolUnsupported: on a limiter that keeps no cooldowns, Rule.Cooldown
// fails with an error wrapping errors.ErrUnsupported, and the calls of a
// rule with a cooldown line are decided by its limits alone.
func (s *suite) coolUnsupported(t *testing.T) {
	r := &ratelimit.Rule{Name: "cooldown/unsupported", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2, Cooldown: true}}}
	l := s.b.New(t)
	ctx := t.Context()
	if err := r.Cooldown(ctx, l, 0, "ada", cooldownSpan); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Cooldown on a limiter without ratelimit.OpCool: %v, want errors.ErrUnsupported", err)
	}
	for i := range 2 {
		if err := r.Check(ctx, l, 1, "ada"); err != nil {
			t.Fatalf("call %d, decided without the cooldown: %v", i, err)
		}
	}
	if err := r.Check(ctx, l, 1, "ada"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("the third call: %v, want the limit's denial", err)
	}
}
