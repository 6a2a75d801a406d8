package limitertest

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// costs are the costs every call of a sequence takes, one cross each.
var costs = []int64{1, 3}

// calls is how many calls a sequence makes: enough to fill and drain a
// limit of threshold 5 several times, few enough to take milliseconds.
const calls = 40

// name returns a cross's subtest name with its cost.
func name(cross string, cost int64) string { return fmt.Sprintf("%s/cost=%d", cross, cost) }

// rng returns the random source of a cross, the same on every run and
// for every backend.
func rng(t *testing.T) *rand.Rand {
	cross := t.Name()
	if i := strings.IndexByte(cross, '/'); i >= 0 {
		cross = cross[i+1:] // without the backend's test
	}
	h := fnv.New64a()
	h.Write([]byte(cross))
	return rand.New(rand.NewPCG(h.Sum64(), 26))
}

// step returns how far the clock moves before a call of a sequence on
// limits of the given period: often not at all or microseconds (calls in
// a burst), mostly a fraction of the period, sometimes past it.
func step(rng *rand.Rand, period time.Duration) time.Duration {
	us := int64(period / time.Microsecond)
	switch r := rng.IntN(100); {
	case r < 30:
		return 0
	case r < 50:
		return time.Duration(rng.IntN(50)) * time.Microsecond
	case r < 95:
		return time.Duration(rng.Int64N(us/16+1)) * time.Microsecond
	default:
		return time.Duration(rng.Int64N(2*us+1)) * time.Microsecond
	}
}

// keys are the per-call keys of a sequence.
var keys = []string{"ada", "grace", "edsger"}

// limit returns a limit of alg of threshold 5 per period.
func limit(alg ratelimit.Algorithm, period time.Duration) ratelimit.Limit {
	return ratelimit.Limit{Algorithm: alg, Period: period, Threshold: 5}
}

// day is the period of the limits of the invariant checks: a backend
// without a controllable clock runs them in real time, in which they
// change nothing.
const day = 24 * time.Hour

// oneLimit: a sequence of calls of one limit of alg, on three keys.
func (s *suite) oneLimit(t *testing.T, alg ratelimit.Algorithm, cost int64) {
	if !s.b.Clock {
		s.exhaust(t, []ratelimit.Limit{limit(alg, day)}, cost)
		return
	}
	s.sequence(t, []ratelimit.Limit{limit(alg, 100*time.Millisecond)}, 100*time.Millisecond, cost)
}

// severalLimits: a sequence of calls of a limit of alg with a sliding log
// and a fixed window, all or nothing.
func (s *suite) severalLimits(t *testing.T, alg ratelimit.Algorithm, cost int64) {
	if !s.b.Clock {
		s.exhaust(t, []ratelimit.Limit{
			limit(alg, day),
			{Algorithm: ratelimit.SlidingLog, Period: day, Threshold: 8},
			{Algorithm: ratelimit.FixedWindow, Period: day, Threshold: 4},
		}, cost)
		return
	}
	s.sequence(t, []ratelimit.Limit{
		limit(alg, 100*time.Millisecond),
		{Algorithm: ratelimit.SlidingLog, Period: 300 * time.Millisecond, Threshold: 8},
		{Algorithm: ratelimit.FixedWindow, Period: 50 * time.Millisecond, Threshold: 4},
	}, 100*time.Millisecond, cost)
}

// sequence runs calls of limits through Limiter.Allow on both limiters,
// on keys at random, the clock moving between them by steps of about
// period (see step).
func (s *suite) sequence(t *testing.T, limits []ratelimit.Limit, period time.Duration, cost int64) {
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for range calls {
			e.advance(step(rng, period))
			req := ratelimit.Request{Name: "sequence", Key: keys[rng.IntN(2)], Cost: cost, Limits: limits}
			c.addDecision(e.allow(req))
		}
		e.both(c)
	})
}

// exhaust checks, without a controllable clock, that a fresh key of
// limits admits calls of cost until the tightest limit holds no more
// (exactly that many, never more), then denies them with a retry time
// within the limits' period, and that another key starts afresh.
func (s *suite) exhaust(t *testing.T, limits []ratelimit.Limit, cost int64) {
	s.run(t, func(e *env) {
		fits := limits[0].MaxCost()
		for _, l := range limits {
			fits = min(fits, l.MaxCost())
		}
		fits /= cost // calls that fit
		for _, key := range []string{"ada", "grace"} {
			req := ratelimit.Request{Name: "exhaust", Key: key, Cost: cost, Limits: limits}
			for i := range fits + 1 {
				o := e.allow(req)
				e.check(o.Err == "", "%s: call %d: %s", key, i, o.Err)
				if i < fits {
					e.check(o.Decision.Allowed, "%s: call %d of %d that fit was denied: %+v", key, i, fits, o.Decision)
					continue
				}
				d := o.Decision
				e.check(!d.Allowed, "%s: call %d admitted beyond the %d that fit: %+v", key, i, fits, d)
				e.check(d.RetryAfter > 0 && d.RetryAfter <= maxRetry(limits), "%s: denial's RetryAfter %s not in (0, %s]", key, d.RetryAfter, maxRetry(limits))
				e.check(d.Remaining < cost, "%s: denied with %d remaining for cost %d", key, d.Remaining, cost)
				e.check(d.LimitIndex >= 0 && d.LimitIndex < len(limits), "%s: denial's LimitIndex %d", key, d.LimitIndex)
			}
		}
	})
}

// maxRetry is the longest a denial of limits may tell a call to wait,
// when every call so far was made within one period of the first: a
// period, but two for a sliding window, whose full window weighs in the
// next one until the weight left lets the call in (1.2 periods for a
// cost-1 call just after a window began, as a 24-hour window is just
// after midnight UTC).
func maxRetry(limits []ratelimit.Limit) time.Duration {
	var longest time.Duration
	for _, l := range limits {
		p := l.Period
		if factsOf(l.AlgorithmOrDefault()).State == limitfacts.Windows {
			p *= 2
		}
		longest = max(longest, p)
	}
	return longest
}

// keysPerLine: a rule of a limit of alg per user and a sliding log for
// every call as one (Rule.KeyExprs), checked with Rule.Admit with a key per limit.
func (s *suite) keysPerLine(t *testing.T, alg ratelimit.Algorithm, cost int64) {
	period := 20 * time.Millisecond // short: an admitted leaky bucket call sleeps its Delay
	if !s.b.Clock {
		period = day
	}
	r := &ratelimit.Rule{
		Name:     "keys_per_line",
		Limits:   []ratelimit.Limit{limit(alg, period), {Algorithm: ratelimit.SlidingLog, Period: 2 * period, Threshold: 12}},
		KeyExprs: []string{"user", ""},
	}
	if !s.b.Clock {
		s.linesInvariants(t, r, cost)
		return
	}
	s.linesSequence(t, r, period, cost)
}

// linesSequence runs calls of r, whose limits have a key each (the
// user's, and one for every call as one), checked with Rule.Admit
// and peeked at with Rule.Peek, each with a key per limit, while the clock moves by steps of
// about period.
func (s *suite) linesSequence(t *testing.T, r *ratelimit.Rule, period time.Duration, cost int64) {
	s.run(t, func(e *env) {
		rng := rng(t)
		var c tally
		for i := range calls {
			e.advance(step(rng, period))
			keys := []string{keys[rng.IntN(len(keys))], ""}
			c.add(e.admit(r, "", keys, cost))
			if s.caps.peek == "" && i%5 == 0 {
				e.peek(r, "", keys)
			}
		}
		e.both(c)
	})
}

// linesInvariants checks, without a controllable clock, that the users of
// a rule with a key per line each get their own limit, and all of them
// together no more than the shared one.
func (s *suite) linesInvariants(t *testing.T, r *ratelimit.Rule, cost int64) {
	s.run(t, func(e *env) {
		own, shared := r.Limits[0].MaxCost()/cost*cost, r.Limits[1].Threshold
		total := int64(0)
		for _, user := range []string{"ada", "grace", "edsger", "barbara"} {
			admitted := int64(0)
			for range own/cost + 1 {
				// Allow decides as the rule would, without pacing (a leaky
				// bucket's Delay) in real time.
				req := ratelimit.Request{Name: r.Name, Keys: []string{user, ""}, Cost: cost, Limits: r.Limits}
				o := e.allow(req)
				e.check(o.Err == "", "%s: %s", user, o.Err)
				if o.Decision.Allowed {
					admitted += cost
				}
			}
			e.check(admitted <= own, "%s admitted %d units, over its own limit's %d", user, admitted, own)
			if user == "ada" {
				e.check(admitted == own, "the first user admitted %d units of its own limit's %d", admitted, own)
			}
			total += admitted
		}
		e.check(total <= shared, "the users admitted %d units together, over the shared limit's %d", total, shared)
		e.check(total > shared-cost-own, "the users admitted %d units together, the shared limit holds %d", total, shared)
	})
}

// calendars: a fixed window of each calendar period, in UTC and in a zone
// that changes its offset, × cost.
func (s *suite) calendars(t *testing.T) {
	// The clock moves by steps of a third of the period's usual length.
	spans := map[string]time.Duration{"day": day / 3, "week": 7 * day / 3, "month": 10 * day, "year": 122 * day}
	for _, cal := range []string{"day", "week", "month", "year"} {
		for _, tz := range []string{"UTC", "Europe/Paris"} {
			for _, cost := range costs {
				cross := fmt.Sprintf("calendar=%s/tz=%s", cal, tz)
				lim := ratelimit.Limit{Calendar: cal, TZ: tz, Threshold: 5}
				t.Run(name(cross, cost), func(t *testing.T) {
					need(t, "decide calendar periods", s.caps.calendar)
					s.needClock(t)
					s.sequence(t, []ratelimit.Limit{lim}, spans[cal], cost)
				})
				t.Run(name(cross+"/keys_per_line", cost), func(t *testing.T) {
					need(t, "decide calendar periods", s.caps.calendar)
					s.needClock(t)
					r := &ratelimit.Rule{
						Name:     "keys_per_line",
						Limits:   []ratelimit.Limit{lim, {Algorithm: ratelimit.SlidingLog, Period: 2 * spans[cal], Threshold: 12}},
						KeyExprs: []string{"user", ""},
					}
					s.linesSequence(t, r, spans[cal], cost)
				})
			}
			s.calendarCrosses(t, cal, tz, spans[cal])
			for _, settle := range settles {
				t.Run(fmt.Sprintf("calendar=%s/tz=%s/reserve/settle=%s", cal, tz, settle.name), func(t *testing.T) {
					need(t, "decide calendar periods", s.caps.calendar)
					need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
					s.needClock(t)
					s.settleSequence(t, ratelimit.Limit{Calendar: cal, TZ: tz, Threshold: 6}, spans[cal], settle.delta)
				})
			}
		}
	}
}
