package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// step is one call of a table test: at is the time since the clock's
// start (1_700_000_000 s plus 4,000 weeks; the start is a multiple of every period used below).
type step struct {
	at        time.Duration
	cost      int64
	allowed   bool
	remaining int64
	retry     time.Duration
	reset     time.Duration
	delay     time.Duration
}

// runSteps decides steps on both backends and wants each decision.
func runSteps(t *testing.T, limits []ratelimit.Limit, steps []step) {
	t.Helper()
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		start := clock.Now()
		l := newLimiter(ratelimit.WithClock(clock))
		for i, s := range steps {
			clock.Set(start.Add(s.at))
			d := allow(t, l, ratelimit.Request{Name: "steps", Cost: s.cost, Limits: limits})
			want := ratelimit.Decision{Allowed: s.allowed, Remaining: s.remaining, RetryAfter: s.retry, ResetAfter: s.reset, Delay: s.delay}
			assert.Equal(t, want, d, "step %d at %s cost %d", i, s.at, s.cost)
		}
	})
}

const us = time.Microsecond

func TestAlgorithmsAndValid(t *testing.T) {
	assert.Equal(t, []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.LeakyBucket, ratelimit.GCRA}, ratelimit.Algorithms())
	for _, a := range ratelimit.Algorithms() {
		assert.True(t, a.Valid(), a)
	}
	assert.True(t, ratelimit.Algorithm("").Valid(), "empty means sliding_log")
	for _, a := range []ratelimit.Algorithm{"magic", "Fixed_Window", "gcra ", "token-bucket"} {
		assert.False(t, a.Valid(), a)
	}
}

func TestFixedWindowSequence(t *testing.T) {
	runSteps(t, []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: 10 * time.Second, Threshold: 3}}, []step{
		{at: 0, allowed: true, remaining: 2, reset: 10 * time.Second},
		{at: time.Second, allowed: true, remaining: 1, reset: 9 * time.Second},
		{at: 2 * time.Second, allowed: true, remaining: 0, reset: 8 * time.Second},
		{at: 3 * time.Second, allowed: false, remaining: 0, retry: 7 * time.Second, reset: 7 * time.Second},
		{at: 10*time.Second - us, allowed: false, remaining: 0, retry: us, reset: us},
		// The window resets at once at its aligned end.
		{at: 10 * time.Second, allowed: true, remaining: 2, reset: 10 * time.Second},
		{at: 10 * time.Second, cost: 3, allowed: false, remaining: 2, retry: 10 * time.Second, reset: 10 * time.Second},
		{at: 11 * time.Second, cost: 2, allowed: true, remaining: 0, reset: 9 * time.Second},
		{at: 15 * time.Second, allowed: false, remaining: 0, retry: 5 * time.Second, reset: 5 * time.Second},
		{at: 35 * time.Second, cost: 3, allowed: true, remaining: 0, reset: 5 * time.Second},
	})
}

// TestFixedWindowBurstAtTheEdge shows the documented weakness: twice the
// threshold within a microsecond across a window edge.
func TestFixedWindowBurstAtTheEdge(t *testing.T) {
	var steps []step
	for range 3 {
		steps = append(steps, step{at: 10*time.Second - us, allowed: true, reset: us})
	}
	steps[0].remaining, steps[1].remaining = 2, 1
	for i := range 3 {
		steps = append(steps, step{at: 10 * time.Second, allowed: true, remaining: int64(2 - i), reset: 10 * time.Second})
	}
	steps = append(steps, step{at: 10 * time.Second, allowed: false, retry: 10 * time.Second, reset: 10 * time.Second})
	runSteps(t, []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: 10 * time.Second, Threshold: 3}}, steps)
}

func TestSlidingWindowSequence(t *testing.T) {
	// 4 per 10s. Window 0 is [0, 10s), window 1 [10s, 20s).
	runSteps(t, []ratelimit.Limit{{Algorithm: ratelimit.SlidingWindow, Period: 10 * time.Second, Threshold: 4}}, []step{
		{at: 0, allowed: true, remaining: 3, reset: 20 * time.Second},
		{at: time.Second, cost: 3, allowed: true, remaining: 0, reset: 19 * time.Second},
		// Window 0 is full: the call fits in window 1 once 4×(10s-e)/10s
		// <= 3, at e = 2.5s.
		{at: 2 * time.Second, allowed: false, remaining: 0, retry: 10500 * time.Millisecond, reset: 18 * time.Second},
		// A microsecond early: 4×7.500001/10 rounds up to 4 units.
		{at: 12500*time.Millisecond - us, allowed: false, remaining: 0, retry: us, reset: 7500*time.Millisecond + us},
		{at: 12500 * time.Millisecond, allowed: true, remaining: 0, reset: 17500 * time.Millisecond},
		// At e = 5s the previous window weighs 2 units and one is counted.
		{at: 15 * time.Second, allowed: true, remaining: 0, reset: 15 * time.Second},
		// Room for 1 more: 4×(10s-e)/10s <= 1 at e = 7.5s.
		{at: 15 * time.Second, allowed: false, remaining: 0, retry: 2500 * time.Millisecond, reset: 15 * time.Second},
		{at: 17500 * time.Millisecond, allowed: true, remaining: 0, reset: 12500 * time.Millisecond},
		// Window 2: the previous (3 units) weighs 3×(10-1)/10 -> 3 units.
		{at: 21 * time.Second, allowed: true, remaining: 0, reset: 19 * time.Second},
		// Window 4 after an idle window 3: nothing weighs.
		{at: 40 * time.Second, cost: 4, allowed: true, remaining: 0, reset: 20 * time.Second},
	})
}

func TestTokenBucketAndGCRASequence(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			// 2 per second (one every 500ms), burst 4.
			runSteps(t, []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 2, Burst: 4}}, []step{
				{at: 0, allowed: true, remaining: 3, reset: 500 * time.Millisecond},
				{at: 0, cost: 3, allowed: true, remaining: 0, reset: 2 * time.Second},
				{at: 0, allowed: false, remaining: 0, retry: 500 * time.Millisecond, reset: 2 * time.Second},
				{at: 500*time.Millisecond - us, allowed: false, remaining: 0, retry: us, reset: 1500*time.Millisecond + us},
				{at: 500 * time.Millisecond, allowed: true, remaining: 0, reset: 2 * time.Second},
				// A cost of 2 needs a second of refill.
				{at: 1200 * time.Millisecond, cost: 2, allowed: false, remaining: 1, retry: 300 * time.Millisecond, reset: 1300 * time.Millisecond},
				{at: 1500 * time.Millisecond, cost: 2, allowed: true, remaining: 0, reset: 2 * time.Second},
				// Idle long enough, the bucket is full again (no more).
				{at: 10 * time.Second, allowed: true, remaining: 3, reset: 500 * time.Millisecond},
			})
		})
	}
}

func TestTokenBucketFractionalRate(t *testing.T) {
	// 3 per second, a token every 333333⅓µs: the TAT keeps the thirds, so
	// the third token after a full bucket is due at exactly 1s, not at
	// 1000002µs as whole-microsecond intervals would make it. Retries
	// round up.
	third := 333333 * us
	runSteps(t, []ratelimit.Limit{{Algorithm: ratelimit.TokenBucket, Period: time.Second, Threshold: 3}}, []step{
		{at: 0, cost: 3, allowed: true, remaining: 0, reset: time.Second},
		{at: 0, allowed: false, remaining: 0, retry: third + us, reset: time.Second},
		{at: third, allowed: false, remaining: 0, retry: us, reset: 666667 * us},
		{at: third + us, allowed: true, remaining: 0, reset: time.Second},
		{at: 666666 * us, allowed: false, remaining: 0, retry: us, reset: 666668 * us},
		{at: 666667 * us, allowed: true, remaining: 0, reset: time.Second},
		{at: time.Second - us, allowed: false, remaining: 0, retry: us, reset: 666668 * us},
		{at: time.Second, allowed: true, remaining: 0, reset: time.Second},
	})
}

func TestLeakyBucketSequence(t *testing.T) {
	// 2 per second (one every 500ms), a queue of 3.
	ms := time.Millisecond
	runSteps(t, []ratelimit.Limit{{Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 2, Capacity: 3}}, []step{
		{at: 0, allowed: true, remaining: 2, reset: 500 * ms},
		{at: 0, allowed: true, remaining: 1, reset: 1000 * ms, delay: 500 * ms},
		{at: 0, allowed: true, remaining: 0, reset: 1500 * ms, delay: 1000 * ms},
		// The queue is full: a place frees when the first call has left.
		{at: 0, allowed: false, remaining: 0, retry: 500 * ms, reset: 1500 * ms},
		{at: 250 * ms, allowed: false, remaining: 0, retry: 250 * ms, reset: 1250 * ms},
		{at: 500*ms - us, allowed: false, remaining: 0, retry: us, reset: 1000*ms + us},
		{at: 500 * ms, allowed: true, remaining: 0, reset: 1500 * ms, delay: 1000 * ms},
		// A call of cost 2 takes two places and leaves after the others.
		{at: 1600 * ms, cost: 2, allowed: true, remaining: 0, reset: 1400 * ms, delay: 400 * ms},
		{at: 5 * time.Second, cost: 3, allowed: true, remaining: 0, reset: 1500 * ms},
	})
}

func TestLeakyBucketDelayIsTheLongestOfSeveral(t *testing.T) {
	limits := []ratelimit.Limit{
		{Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 10, Capacity: 5}, // every 100ms
		{Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 4, Capacity: 5},  // every 250ms
		{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 5},
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		req := ratelimit.Request{Name: "pace", Limits: limits}
		for i := range 5 {
			d := allow(t, l, req)
			require.True(t, d.Allowed)
			assert.Equal(t, time.Duration(i)*250*time.Millisecond, d.Delay, "call %d", i)
		}
		d := allow(t, l, req)
		assert.False(t, d.Allowed)
		assert.Zero(t, d.Delay)
	})
}

// TestMixedMultiLimitDenialChargesNothing denies calls by a limit of each
// algorithm, then shows that none of six others, each with one unit left,
// was charged.
func TestMixedMultiLimitDenialChargesNothing(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			limits := []ratelimit.Limit{
				{Algorithm: alg, Period: time.Minute, Threshold: 3},
				{Algorithm: ratelimit.SlidingLog, Period: time.Hour, Threshold: 4},
				{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 4},
				{Algorithm: ratelimit.SlidingWindow, Period: time.Hour, Threshold: 4},
				{Algorithm: ratelimit.TokenBucket, Period: time.Hour, Threshold: 1, Burst: 4},
				{Algorithm: ratelimit.LeakyBucket, Period: time.Hour, Threshold: 1, Capacity: 4},
				{Algorithm: ratelimit.GCRA, Period: time.Hour, Threshold: 1, Burst: 4},
			}
			forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
				clock := newManualClock()
				l := newLimiter(ratelimit.WithClock(clock))
				req := ratelimit.Request{Name: "mixed", Limits: limits}
				for range 3 {
					require.True(t, allow(t, l, req).Allowed)
				}
				for range 5 {
					clock.Advance(time.Millisecond)
					d := allow(t, l, req)
					require.False(t, d.Allowed)
					assert.Equal(t, 0, d.LimitIndex)
				}
				// Limit 0 has room again a minute later; had any denial
				// charged another limit, that one would deny now.
				clock.Advance(time.Minute)
				d := allow(t, l, req)
				require.True(t, d.Allowed)
				assert.Equal(t, int64(0), d.Remaining)
				assert.False(t, allow(t, l, req).Allowed)
			})
		})
	}
}

func TestMultiLimitPicksLongestRetryAndFewestRemaining(t *testing.T) {
	limits := []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 5},
		{Algorithm: ratelimit.GCRA, Period: time.Minute, Threshold: 2, Burst: 2},
		{Algorithm: ratelimit.SlidingWindow, Period: time.Hour, Threshold: 10},
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		req := ratelimit.Request{Name: "pick", Limits: limits}
		d := allow(t, l, req)
		require.True(t, d.Allowed)
		assert.Equal(t, 1, d.LimitIndex, "GCRA has 1 left, the others 4 and 9")
		assert.Equal(t, int64(1), d.Remaining)
		assert.Equal(t, 30*time.Second, d.ResetAfter)
		d = allow(t, l, req)
		require.True(t, d.Allowed)
		assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 0, ResetAfter: time.Minute, LimitIndex: 1}, d)
		d = allow(t, l, req)
		require.False(t, d.Allowed)
		assert.Equal(t, ratelimit.Decision{Remaining: 0, RetryAfter: 30 * time.Second, ResetAfter: time.Minute, LimitIndex: 1}, d)
	})
}

func TestCostBeyondWhatALimitCanEverAdmit(t *testing.T) {
	cases := []struct {
		limit ratelimit.Limit
		ok    int64 // the largest cost admitted
	}{
		{ratelimit.Limit{Period: time.Second, Threshold: 5}, 5},
		{ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 5}, 5},
		{ratelimit.Limit{Algorithm: ratelimit.SlidingWindow, Period: time.Second, Threshold: 5}, 5},
		{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Period: time.Second, Threshold: 5}, 5},
		{ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Period: time.Second, Threshold: 5, Burst: 12}, 12},
		{ratelimit.Limit{Algorithm: ratelimit.GCRA, Period: time.Second, Threshold: 5, Burst: 2}, 2},
		{ratelimit.Limit{Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 5}, 5},
		{ratelimit.Limit{Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 5, Capacity: 9}, 9},
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		for i, c := range cases {
			req := ratelimit.Request{Name: fmt.Sprint("cost", i), Cost: c.ok, Limits: []ratelimit.Limit{c.limit}}
			d := allow(t, l, req)
			assert.True(t, d.Allowed, "%s cost %d", c.limit, c.ok)
			req.Cost++
			_, err := l.Allow(context.Background(), req)
			var ce *ratelimit.CostError
			if assert.ErrorAs(t, err, &ce, "%s cost %d", c.limit, req.Cost) {
				assert.Equal(t, req.Cost, ce.Cost)
				assert.Equal(t, c.limit, ce.Limit)
			}
			assert.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
		}
	})
}

func TestInvalidLimitsOfTheAlgorithms(t *testing.T) {
	day := 24 * time.Hour
	bad := map[string]ratelimit.Limit{
		"burst on fixed_window":       {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 1, Burst: 2},
		"burst on sliding_log":        {Period: time.Second, Threshold: 1, Burst: 2},
		"burst on leaky_bucket":       {Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 1, Burst: 2},
		"capacity on gcra":            {Algorithm: ratelimit.GCRA, Period: time.Second, Threshold: 1, Capacity: 2},
		"capacity on sliding_window":  {Algorithm: ratelimit.SlidingWindow, Period: time.Second, Threshold: 1, Capacity: 2},
		"negative burst":              {Algorithm: ratelimit.TokenBucket, Period: time.Second, Threshold: 1, Burst: -1},
		"negative capacity":           {Algorithm: ratelimit.LeakyBucket, Period: time.Second, Threshold: 1, Capacity: -1},
		"threshold above 2^50":        {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 1 << 50},
		"burst above 2^50":            {Algorithm: ratelimit.GCRA, Period: time.Second, Threshold: 1, Burst: 1 << 50},
		"period above 2^50µs":         {Algorithm: ratelimit.FixedWindow, Period: (1 << 50) * us, Threshold: 1},
		"a bucket draining 100 years": {Algorithm: ratelimit.TokenBucket, Period: day, Threshold: 1, Burst: 40_000},
		"unknown algorithm":           {Algorithm: "token bucket", Period: time.Second, Threshold: 1},
		"fixed_window in 1.5ms":       {Algorithm: ratelimit.FixedWindow, Period: 1500 * us, Threshold: 1},
		"sliding_window in 1µs":       {Algorithm: ratelimit.SlidingWindow, Period: us, Threshold: 1},
		"sliding_window above 2^26-1": {Algorithm: ratelimit.SlidingWindow, Period: time.Second, Threshold: ratelimit.MaxSlidingWindowThreshold + 1},
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter()
		for name, lim := range bad {
			_, err := l.Allow(context.Background(), ratelimit.Request{Name: "x", Limits: []ratelimit.Limit{lim}})
			assert.ErrorIs(t, err, ratelimit.ErrInvalidLimit, name)
			assert.NotErrorIs(t, err, ratelimit.ErrBackend, name)
		}
		for i, lim := range []ratelimit.Limit{
			{Algorithm: ratelimit.FixedWindow, Period: (1<<50 - 1) / 1000 * time.Millisecond, Threshold: 1<<50 - 1},
			{Algorithm: ratelimit.SlidingWindow, Period: (1<<50 - 1) / 1000 * time.Millisecond, Threshold: ratelimit.MaxSlidingWindowThreshold},
			{Algorithm: ratelimit.TokenBucket, Period: day, Threshold: 1, Burst: 10_000},
			{Algorithm: ratelimit.GCRA, Period: time.Microsecond, Threshold: 1<<50 - 1, Burst: 1<<50 - 1},
		} {
			_, err := l.Allow(context.Background(), ratelimit.Request{Name: fmt.Sprint("ok", i), Limits: []ratelimit.Limit{lim}})
			assert.NoError(t, err, lim)
		}
	})
}

// retryCases are limits (alone and mixed) on which every denial's
// RetryAfter is checked to be exact.
func retryCases() map[string][]ratelimit.Limit {
	cases := map[string][]ratelimit.Limit{}
	for _, alg := range ratelimit.Algorithms() {
		cases[string(alg)] = []ratelimit.Limit{{Algorithm: alg, Period: 100 * time.Millisecond, Threshold: 4}}
		cases[string(alg)+"/fractional"] = []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 7}}
		if alg == ratelimit.FixedWindow || alg == ratelimit.SlidingWindow { // whole milliseconds
			cases[string(alg)+"/3ms"] = []ratelimit.Limit{{Algorithm: alg, Period: 3 * time.Millisecond, Threshold: 2}}
		} else {
			cases[string(alg)+"/3us"] = []ratelimit.Limit{{Algorithm: alg, Period: 3 * us, Threshold: 2}}
		}
	}
	cases["token_bucket/burst"] = []ratelimit.Limit{{Algorithm: ratelimit.TokenBucket, Period: 30 * time.Millisecond, Threshold: 3, Burst: 8}}
	cases["gcra/burst1"] = []ratelimit.Limit{{Algorithm: ratelimit.GCRA, Period: 70 * time.Millisecond, Threshold: 9, Burst: 1}}
	cases["leaky_bucket/capacity"] = []ratelimit.Limit{{Algorithm: ratelimit.LeakyBucket, Period: 50 * time.Millisecond, Threshold: 3, Capacity: 7}}
	cases["sliding_window/daily"] = []ratelimit.Limit{{Algorithm: ratelimit.SlidingWindow, Period: 24 * time.Hour, Threshold: ratelimit.MaxSlidingWindowThreshold}}
	cases["gcra/daily"] = []ratelimit.Limit{{Algorithm: ratelimit.GCRA, Period: 24 * time.Hour, Threshold: 1e9 + 7, Burst: 3e9}}
	cases["mixed"] = []ratelimit.Limit{
		{Algorithm: ratelimit.SlidingWindow, Period: 80 * time.Millisecond, Threshold: 5},
		{Algorithm: ratelimit.LeakyBucket, Period: 100 * time.Millisecond, Threshold: 4, Capacity: 3},
		{Algorithm: ratelimit.FixedWindow, Period: 60 * time.Millisecond, Threshold: 3},
		{Algorithm: ratelimit.SlidingLog, Period: 90 * time.Millisecond, Threshold: 4},
		{Algorithm: ratelimit.GCRA, Period: 40 * time.Millisecond, Threshold: 1, Burst: 2},
	}
	return cases
}

// TestRetryAfterIsExact denies calls at random moments and checks, on both
// backends, that a call made RetryAfter-1µs later is still denied (with a
// RetryAfter of 1µs) and one made exactly RetryAfter later is admitted.
func TestRetryAfterIsExact(t *testing.T) {
	for name, limits := range retryCases() {
		t.Run(name, func(t *testing.T) {
			capacity := limits[0].MaxCost()
			for _, l := range limits {
				capacity = min(capacity, l.MaxCost())
			}
			period := limits[0].Period
			forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
				rng := rand.New(rand.NewPCG(uint64(len(name)), 9))
				clock := newManualClock()
				l := newLimiter(ratelimit.WithClock(clock))
				checked := 0
				for i := 0; checked < 40 && i < 3000; i++ {
					clock.Advance(time.Duration(rng.Int64N(int64(period/us)/3+1)) * us)
					cost := 1 + rng.Int64N(min(capacity, 1e6))
					if capacity > 1e6 {
						cost = 1 + rng.Int64N(capacity/3)
					}
					req := ratelimit.Request{Name: "retry", Cost: cost, Limits: limits}
					d := allow(t, l, req)
					if d.Allowed {
						continue
					}
					require.Positive(t, d.RetryAfter)
					checked++
					if d.RetryAfter > us {
						clock.Advance(d.RetryAfter - us)
						early := allow(t, l, req)
						require.False(t, early.Allowed, "call %d: %+v admitted %s early after %+v", i, req, us, d)
						require.Equal(t, us, early.RetryAfter, "call %d", i)
						clock.Advance(us)
					} else {
						clock.Advance(us)
					}
					require.True(t, allow(t, l, req).Allowed, "call %d: %+v denied at its retry time after %+v", i, req, d)
				}
				require.Equal(t, 40, checked)
			})
		})
	}
}

// TestNoOverflowAtTheEdges decides daily billion-unit limits and 1µs
// periods on both backends, where naive products overflow int64 (and
// doubles lose integers).
func TestNoOverflowAtTheEdges(t *testing.T) {
	day := 24 * time.Hour
	// The clock starts 22h13m20s into a UTC day; the next starts at D.
	const D = 6400 * time.Second
	t.Run("fixed_window/daily", func(t *testing.T) {
		runSteps(t, []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: day, Threshold: 1e9}}, []step{
			{at: D + time.Hour, cost: 4e8, allowed: true, remaining: 6e8, reset: 23 * time.Hour},
			{at: D + 2*time.Hour, cost: 6e8, allowed: true, remaining: 0, reset: 22 * time.Hour},
			{at: D + 3*time.Hour, allowed: false, remaining: 0, retry: 21 * time.Hour, reset: 21 * time.Hour},
			{at: D + day, cost: 1e9, allowed: true, remaining: 0, reset: day},
		})
	})
	t.Run("sliding_window/daily", func(t *testing.T) {
		const T = ratelimit.MaxSlidingWindowThreshold // 2^26-1
		runSteps(t, []ratelimit.Limit{{Algorithm: ratelimit.SlidingWindow, Period: day, Threshold: T}}, []step{
			{at: D, cost: T, allowed: true, remaining: 0, reset: 2 * day},
			// 6h into the next day the first weighs ⌈T×18/24⌉ = 50331648.
			{at: D + 30*time.Hour, cost: T - 50331648, allowed: true, remaining: 0, reset: 42 * time.Hour},
			// One more unit fits once T×(24h-e)/24h <= 50331647, at
			// e = 6h + 0.6ms: the next whole millisecond.
			{at: D + 30*time.Hour, allowed: false, remaining: 0, retry: time.Millisecond, reset: 42 * time.Hour},
			{at: D + 30*time.Hour + 999*us, allowed: false, remaining: 0, retry: us, reset: 42*time.Hour - 999*us},
			{at: D + 30*time.Hour + time.Millisecond, allowed: true, remaining: 0, reset: 42*time.Hour - time.Millisecond},
		})
	})
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.LeakyBucket} {
		t.Run(string(alg)+"/daily", func(t *testing.T) {
			// A unit every 86.4µs.
			lim := ratelimit.Limit{Algorithm: alg, Period: day, Threshold: 1e9}
			steps := []step{
				{at: 0, cost: 1e9, allowed: true, remaining: 0, reset: day},
				{at: 0, allowed: false, remaining: 0, retry: 87 * us, reset: day},
				{at: 87 * us, allowed: true, remaining: 0, reset: day},
				// 12h refill 5e8 units, less the one taken (and 0.6µs).
				{at: 12 * time.Hour, cost: 5e8, allowed: false, remaining: 5e8 - 1, retry: 87 * us, reset: 12*time.Hour + 87*us},
				{at: 12 * time.Hour, cost: 5e8 - 1, allowed: true, remaining: 0, reset: day},
				{at: 36 * time.Hour, cost: 1e9, allowed: true, remaining: 0, reset: day},
			}
			if alg == ratelimit.LeakyBucket {
				steps[2].delay = day - 87*us // behind a billion units
				steps[4].delay = 12*time.Hour + 87*us
			}
			runSteps(t, []ratelimit.Limit{lim}, steps)
		})
	}
	for _, alg := range ratelimit.Algorithms() {
		unit := us // the shortest period: 1µs, or 1ms for the windows
		if alg == ratelimit.FixedWindow || alg == ratelimit.SlidingWindow {
			unit = time.Millisecond
		}
		t.Run(string(alg)+"/"+unit.String(), func(t *testing.T) {
			lim := ratelimit.Limit{Algorithm: alg, Period: unit, Threshold: 1}
			steps := []step{
				{at: 0, allowed: true, remaining: 0, reset: unit},
				{at: 0, allowed: false, remaining: 0, retry: unit, reset: unit},
				{at: unit, allowed: true, remaining: 0, reset: unit},
			}
			if alg == ratelimit.SlidingWindow {
				// At a 1ms period every millisecond starts a window, in
				// which the previous one still weighs fully: one call per 2ms.
				steps = []step{
					{at: 0, allowed: true, remaining: 0, reset: 2 * unit},
					{at: 0, allowed: false, remaining: 0, retry: 2 * unit, reset: 2 * unit},
					{at: unit, allowed: false, remaining: 0, retry: unit, reset: unit},
					{at: 2 * unit, allowed: true, remaining: 0, reset: 2 * unit},
				}
			}
			runSteps(t, []ratelimit.Limit{lim}, steps)
		})
	}
	t.Run("largest values", func(t *testing.T) {
		big := int64(1<<50 - 1)
		for _, alg := range ratelimit.Algorithms()[1:] {
			lim := ratelimit.Limit{Algorithm: alg, Period: time.Duration(big) * us, Threshold: big}
			switch alg {
			case ratelimit.FixedWindow:
				lim.Period = lim.Period.Truncate(time.Millisecond)
			case ratelimit.SlidingWindow:
				lim.Period, lim.Threshold = lim.Period.Truncate(time.Millisecond), ratelimit.MaxSlidingWindowThreshold
			}
			forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
				l := newLimiter(ratelimit.WithClock(newManualClock()))
				d := allow(t, l, ratelimit.Request{Name: "big", Cost: lim.Threshold - 1, Limits: []ratelimit.Limit{lim}})
				require.True(t, d.Allowed, alg)
				assert.Equal(t, int64(1), d.Remaining, alg)
				d = allow(t, l, ratelimit.Request{Name: "big", Cost: 2, Limits: []ratelimit.Limit{lim}})
				require.False(t, d.Allowed, alg)
				assert.Equal(t, int64(1), d.Remaining, alg)
				assert.Positive(t, d.RetryAfter, alg)
			})
		}
	})
}

// TestEveryAlgorithmIsExactUnderConcurrency decides 320 calls from 64
// goroutines against a limit of 50 on a frozen clock: through two Redis
// clients, and in process, exactly 50 are admitted.
func TestEveryAlgorithmIsExactUnderConcurrency(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			clock := newManualClock()
			srv.Flush(t)
			limiters := map[string][]ratelimit.Limiter{
				"redis": {New(rdb(t), ratelimit.WithClock(clock)), New(rdb(t), ratelimit.WithClock(clock))},
				"redis-generic": {
					newTest(rdb(t), ratelimit.WithClock(clock), withGenericScript()),
					newTest(rdb(t), ratelimit.WithClock(clock), withGenericScript()),
				},
				"memory": {ratelimit.NewMemory(ratelimit.WithClock(clock))},
			}
			for name, ls := range limiters {
				req := ratelimit.Request{Name: "race-" + name, Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 50}}}
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range 64 {
					wg.Go(func() {
						for range 5 {
							d, err := ls[g%len(ls)].Allow(context.Background(), req)
							if assert.NoError(t, err) && d.Allowed {
								admitted.Add(1)
							}
						}
					})
				}
				wg.Wait()
				assert.Equal(t, int64(50), admitted.Load(), name)
			}
		})
	}
}
