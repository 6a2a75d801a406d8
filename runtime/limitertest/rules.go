package limitertest

import (
	"fmt"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// waitWays are the ways a call of a rule with Wait is made, each a
// cross: Rule.Check of one key and of a key per limit of a rule with KeyExprs (the
// user's, and one for every call as one), and Rule.Reserve.
var waitWays = []string{"check", "keys_per_line", "reserve"}

// waitRule returns a rule of a limit of alg per period with wait, made
// the way way.
func waitRule(alg ratelimit.Algorithm, period, wait time.Duration, way string) *ratelimit.Rule {
	return waitRuleOf(limit(alg, period), period, wait, way)
}

// waitRuleOf returns a rule of lim with wait, made the way way; its
// limit for every call as one (keys_per_line) has period period.
func waitRuleOf(lim ratelimit.Limit, period, wait time.Duration, way string) *ratelimit.Rule {
	r := &ratelimit.Rule{Name: "wait", Limits: []ratelimit.Limit{lim}, Wait: wait}
	if way == "keys_per_line" {
		r.Limits = append(r.Limits, ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Period: period, Threshold: 100})
		r.KeyExprs = []string{"user", ""}
	}
	return r
}

// callOf returns the request of a call of r by user of cost units,
// as Rule.Check makes it.
func callOf(r *ratelimit.Rule, user string, cost int64) ratelimit.Request {
	req := ratelimit.Request{Name: r.Name, Key: user, Cost: cost, Limits: r.Limits}
	if r.KeyExprs != nil {
		req.Key, req.Keys = "", []string{user, ""}
	}
	return req
}

// wait makes a call of r by user of one unit on l the way way.
func (e *env) wait(r *ratelimit.Rule, l ratelimit.Limiter, user, way string) error {
	switch way {
	case "keys_per_line":
		return r.Check(e.ctx, l, 1, user, "")
	case "reserve":
		_, err := r.Reserve(e.ctx, l, 1, user)
		return err
	}
	return r.Check(e.ctx, l, 1, user)
}

// waitBeyondBudget: a call of a rule with Wait whose denial's RetryAfter
// is beyond the wait is denied at once, as a call without Wait.
func (s *suite) waitBeyondBudget(t *testing.T, alg ratelimit.Algorithm, way string) {
	s.waitBeyondBudgetOf(t, waitRule(alg, time.Hour, 50*time.Millisecond, way), way)
}

// waitBeyondBudgetOf is waitBeyondBudget of r, made the way way, whose
// first limit's denial has a RetryAfter beyond r.Wait.
func (s *suite) waitBeyondBudgetOf(t *testing.T, r *ratelimit.Rule, way string) {
	if way == "reserve" {
		need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	}
	s.run(t, func(e *env) {
		// Allow charges without pacing (a leaky bucket's Delay would make
		// the rule's call sleep).
		o := e.allow(callOf(r, "ada", r.Limits[0].MaxCost()))
		e.check(o.Err == "" && o.Decision.Allowed, "a fresh key was not admitted its limit's MaxCost: %+v", o)
		o = e.same("the call that waits", func(l ratelimit.Limiter, _ bool) outcome {
			return outcomeOf(ratelimit.Admission{}, e.wait(r, l, "ada", way))
		})
		e.check(o.Err == "limited", "a call whose retry is an hour away, with a wait of %s: %+v", r.Wait, o)
		e.check(o.Denial.RetryAfter > r.Wait, "the denial's RetryAfter %s is within the wait", o.Denial.RetryAfter)
		o = e.same("another key", func(l ratelimit.Limiter, _ bool) outcome {
			return outcomeOf(ratelimit.Admission{}, e.wait(r, l, "grace", way))
		})
		e.check(o.Err == "", "another key is admitted: %+v", o)
	})
}

// waitAdmitted: a call of a rule with Wait, denied for less than the
// wait, waits and is admitted once the limit has room, on the clock
// running at real speed (so the calls are not compared, only their
// outcomes: each limiter admits it).
func (s *suite) waitAdmitted(t *testing.T, alg ratelimit.Algorithm, way string) {
	if way == "reserve" {
		need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	}
	r := waitRule(alg, 40*time.Millisecond, time.Minute, way)
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			user, d, asked := e.filled(r, l)
			var err error
			e.whileRunning(func() { err = e.wait(r, l.limiter, user, way) })
			// The limit had room RetryAfter after the denial, which came
			// after asked (the suite's clock runs behind real time); a
			// backend on a clock of its own reads a time that may lag
			// the caller's a little (a Redis server's, cached per
			// command), so a millisecond of slack.
			waited := time.Since(asked)
			e.check(err == nil, "%s: a call denied for %s with a wait of %s was not admitted: %v", l.name, d.RetryAfter, r.Wait, err)
			e.check(waited > d.RetryAfter-time.Millisecond, "%s: the call was admitted after %s, before the limit had room (%s)", l.name, waited, d.RetryAfter)
		}
	})
}

// fillTries is how many fresh keys filled returns to before it fails.
const fillTries = 5

// filled fills r's first limit for a fresh key on l and returns the key,
// the denial of a call of one unit that follows, and when that call was
// asked. On a clock at real speed a window may end between the two
// calls, so that the call is admitted as it should be; the chance is the
// time between them over the period, so filled tries again with another
// key, up to fillTries times: a backend that admits past a full limit
// fails every try.
func (e *env) filled(r *ratelimit.Rule, l named) (user string, d ratelimit.Decision, asked time.Time) {
	for try := range fillTries {
		user = fmt.Sprintf("%s/%d", l.name, try)
		var err error
		d, err = l.limiter.Allow(e.ctx, callOf(r, user, r.Limits[0].MaxCost()))
		e.check(err == nil && d.Allowed, "%s: a fresh key was not admitted its limit's MaxCost: %+v, %v", l.name, d, err)
		asked = time.Now()
		d, err = l.limiter.Allow(e.ctx, callOf(r, user, 1))
		e.check(err == nil, "%s: the call after the filling one: %v", l.name, err)
		if !d.Allowed {
			return user, d, asked
		}
	}
	e.fatalf("%s: the filled limit admitted a call in each of %d tries: %+v", l.name, fillTries, d)
	return user, d, asked
}

// named is a limiter of a run and what to call it in messages.
type named struct {
	name    string
	limiter ratelimit.Limiter
}

// limiters returns the run's limiters: the backend's, and the twin.
func (e *env) limiters() []named {
	ls := []named{{"backend", e.got}}
	if e.want != nil {
		ls = append(ls, named{"twin", e.want})
	}
	return ls
}

// shadow: calls of a shadow rule, made the way way (see waitWays), are
// never denied, yet those the limit admits are charged, as calls of the
// same rule not in shadow see; a shadow reservation settled with more
// than it took charges the difference only when the limit admitted it.
func (s *suite) shadow(t *testing.T, alg ratelimit.Algorithm, way string) {
	if way == "reserve" {
		need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	}
	period := 20 * time.Millisecond
	if !s.b.Clock {
		period = day
	}
	real := waitRule(alg, period, 0, way)
	real.Name = "shadow"
	shadow := real.Clone()
	shadow.Shadow = true
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for i := range calls {
			if e.clock != nil {
				e.advance(step(rng, period))
			}
			if i%3 == 2 {
				// Allow decides as the rule not in shadow would, without
				// pacing (a leaky bucket's Delay) in real time.
				c.addDecision(e.allow(callOf(real, "ada", 2)))
				continue
			}
			var o outcome
			switch way {
			case "reserve":
				var res reservations
				o, res = e.reserve(shadow, "ada", 2)
				if res.got != nil {
					e.settle(res, 3)
				}
			case "keys_per_line":
				o = e.admit(shadow, "", []string{"ada", ""}, 2)
			default:
				o = e.admit(shadow, "ada", nil, 2)
			}
			e.check(o.Err == "", "a shadow rule denied a call: %+v", o)
			e.check(!o.Decided, "a shadow rule's admission is Decided: %+v", o)
		}
		e.check(c.denied > 0, "the shadow calls charged nothing: %d admitted, %d denied", c.admitted, c.denied)
	})
}

// peekReset: Peek between the calls of a sequence tells what the next
// call would get, and Reset starts a key afresh.
func (s *suite) peekReset(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "peek (ratelimit.Peek)", s.caps.peek)
	need(t, "reset (ratelimit.Reset)", s.caps.reset)
	period := 20 * time.Millisecond
	if !s.b.Clock {
		period = day
	}
	s.peekSequence(t, &ratelimit.Rule{Name: "peek", Limits: []ratelimit.Limit{limit(alg, period)}}, period)
}

// peekSequence is peekReset of r, whose one limit holds 5 units, the
// clock moving by steps of about period.
func (s *suite) peekSequence(t *testing.T, r *ratelimit.Rule, period time.Duration) {
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for i := range calls {
			if e.clock != nil {
				e.advance(step(rng, period))
			}
			p := e.peek(r, "ada", nil)
			o := e.allow(ratelimit.Request{Name: r.Name, Key: "ada", Limits: r.Limits})
			c.addDecision(o)
			e.check(p.Err == "", "Peek: %s", p.Err)
			e.check(p.Decision.Allowed == o.Decision.Allowed, "Peek said allowed=%v, the call then got %+v", p.Decision.Allowed, o)
			if i%10 == 9 {
				e.reset(r.Name, "ada")
				p = e.peek(r, "ada", nil)
				e.check(p.Decision.Allowed && p.Decision.Remaining == r.Limits[0].Threshold, "Peek after Reset: %+v", p.Decision)
			}
		}
		if !e.differential() {
			// On a day's limit, the sequence is four fills and resets.
			e.check(c.admitted == 4*5, "%d calls admitted of a limit of 5 reset every 10 calls", c.admitted)
		}
		e.both(c)
	})
}

// overrideCase is a cross of overrides: the fields of ParseOverrides that
// set it, where RULE stands for the rule's name.
type overrideCase struct {
	name   string
	fields map[string]string
}

// overrideCases are a rule's override, a key's, a tier's, and the two
// words.
var overrideCases = []overrideCase{
	{"rule", map[string]string{"RULE": "period=20ms threshold=3"}},
	{"key", map[string]string{"RULE": "period=20ms threshold=3", "RULE|key=ada": "period=40ms threshold=2"}},
	{"tier", map[string]string{
		"RULE|tier=gold": "period=20ms threshold=8", "RULE|key=ada": "tier=gold", "RULE|key=grace": "tier=gold",
		"RULE|key=edsger": `{"period": "40ms", "threshold": 2}`,
	}},
	{"unlimited", map[string]string{"RULE|key=ada": "unlimited"}},
	{"block", map[string]string{"RULE|key=ada": "block", "RULE": "period=20ms threshold=4"}},
}

// overrides: a sequence of calls of a rule of a limit of alg on three
// keys, whose limits overrides change: both limiters apply the same
// limits to each key. With lines, the rule has a key per limit (the
// user's, and one for every call as one), whose limit i an override's
// limit i replaces.
func (s *suite) overrides(t *testing.T, alg ratelimit.Algorithm, oc overrideCase, lines bool) {
	need(t, "apply overrides (ratelimit.WithOverrides)", s.caps.overrides)
	s.needClock(t)
	s.overridesOf(t, limit(alg, 20*time.Millisecond), 20*time.Millisecond, oc, lines)
}

// overridesOf is overrides of a rule of lim, the clock moving by steps of
// about period. Rule.Explain and Rule.Admit of each call tell the same on
// both limiters.
func (s *suite) overridesOf(t *testing.T, lim ratelimit.Limit, period time.Duration, oc overrideCase, lines bool) {
	need(t, "apply overrides (ratelimit.WithOverrides)", s.caps.overrides)
	s.needClock(t)
	r := &ratelimit.Rule{Name: "overrides", Limits: []ratelimit.Limit{lim}}
	if lines {
		r.Limits = append(r.Limits, ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Period: 2 * period, Threshold: 12})
		r.KeyExprs = []string{"user", ""}
	}
	src := parseOverrides(t, r.Name, oc)
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for range calls {
			e.advance(step(rng, period))
			keys := []string{keys[rng.IntN(len(keys))]}
			if lines {
				keys = append(keys, "")
			}
			e.explain(r, keys)
			o := e.admitKeys(r, keys, 2)
			c.add(o)
			checkVerdict(e, oc, keys[0], o)
		}
		e.both(c)
	}, ratelimit.WithOverrides(src))
}

// parseOverrides returns the overrides of oc for the rule named name.
func parseOverrides(t *testing.T, name string, oc overrideCase) *ratelimit.StaticOverrides {
	t.Helper()
	fields := map[string]string{}
	for f, v := range oc.fields {
		fields[name+f[len("RULE"):]] = v
	}
	src, err := ratelimit.ParseOverrides(fields)
	if err != nil {
		t.Fatalf("ParseOverrides(%q): %v", fields, err)
	}
	return src
}

// checkVerdict checks the outcome o of a call of key under the overrides
// of oc that block or exempt key "ada".
func checkVerdict(e *env, oc overrideCase, key string, o outcome) {
	if key != "ada" {
		return
	}
	switch oc.name {
	case "block":
		e.check(o.Err == "limited" && o.Denial.Remaining == 0, "a blocked key was not denied: %+v", o)
	case "unlimited":
		e.check(o.Err == "", "an unlimited key was denied: %+v", o)
	}
}
