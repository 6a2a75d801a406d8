package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingLimiter counts the decisions it asks of the limiter it wraps:
// for the Redis limiter, one per Redis command (one EVALSHA each).
type countingLimiter struct {
	Limiter
	calls atomic.Int64
}

func (c *countingLimiter) Allow(ctx context.Context, req Request) (Decision, error) {
	c.calls.Add(1)
	return c.Limiter.Allow(ctx, req)
}

// stubLimiter answers every call with d and err, counting them.
type stubLimiter struct {
	d     Decision
	err   error
	calls atomic.Int64
}

func (s *stubLimiter) Allow(context.Context, Request) (Decision, error) {
	s.calls.Add(1)
	return s.d, s.err
}

func perPeriod(n int64, period time.Duration) []Limit {
	return []Limit{{Period: period, Threshold: n}}
}

func TestCheckNegativeCostIsATypedError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := &countingLimiter{Limiter: newLimiter()}
		rule := &Rule{Name: "neg", Limits: perPeriod(5, time.Minute), OnError: FailOpen, Shadow: true}
		var err error
		require.NotPanics(t, func() { err = rule.Check(context.Background(), l, "", -3) })
		var ce *CostError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, int64(-3), ce.Cost)
		assert.Equal(t, "neg", ce.Name)
		assert.ErrorIs(t, err, ErrInvalidLimit)
		assert.NotErrorIs(t, err, ErrBackend)
		assert.NotErrorIs(t, err, ErrLimited)
		assert.Equal(t, "ratelimit: neg: cost -3 is negative", err.Error())
		assert.Zero(t, l.calls.Load(), "nothing to ask the limiter")
	})
}

func TestCheckCostAboveThresholdIgnoresPolicyAndShadow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := newLimiter()
		for _, rule := range []*Rule{
			{Name: "big", Limits: perPeriod(5, time.Minute), OnError: FailOpen},
			{Name: "big", Limits: perPeriod(5, time.Minute), Shadow: true},
		} {
			err := rule.Check(context.Background(), l, "", 6)
			var ce *CostError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrInvalidLimit)
		}
	})
}

func TestCheckCostIsCharged(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := newLimiter(WithClock(newManualClock()))
		rule := &Rule{Name: "cost", Limits: perPeriod(10, time.Minute)}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, "", 7))
		require.NoError(t, rule.Check(ctx, l, "", 3))
		var le *LimitError
		require.ErrorAs(t, rule.Check(ctx, l, "", 1), &le)
		assert.Zero(t, le.Remaining)
	})
}

func TestCheckSeveralLimitsReportsTheDenyingOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := newLimiter(WithClock(newManualClock()))
		rule := &Rule{Name: "multi", Limits: []Limit{
			{Period: time.Second, Threshold: 10},
			{Period: time.Hour, Threshold: 2},
		}}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, "k", 1))
		require.NoError(t, rule.Check(ctx, l, "k", 1))
		var le *LimitError
		require.ErrorAs(t, rule.Check(ctx, l, "k", 1), &le)
		assert.Equal(t, rule.Limits[1], le.Limit)
		assert.Equal(t, time.Hour, le.RetryAfter)
	})
}

// pacedLimiter moves clock on by the RetryAfter of each denial it
// returns, so that a waiting call's sleep of RetryAfter ends when the limit
// frees on clock, however much longer the sleep really takes.
type pacedLimiter struct {
	Limiter
	clock *manualClock
}

func (p *pacedLimiter) Allow(ctx context.Context, req Request) (Decision, error) {
	d, err := p.Limiter.Allow(ctx, req)
	if err == nil && !d.Allowed {
		p.clock.Advance(d.RetryAfter)
	}
	return d, err
}

func TestWaitIsAdmittedAfterSleeping(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		clock := newManualClock()
		l := &countingLimiter{Limiter: &pacedLimiter{Limiter: newLimiter(WithClock(clock)), clock: clock}}
		rule := &Rule{Name: "wait", Limits: perPeriod(1, 50*time.Millisecond), Wait: 5 * time.Second}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, "", 1))
		require.NoError(t, rule.Check(ctx, l, "", 1), "admitted once the first call left the window")
		assert.Equal(t, int64(3), l.calls.Load(), "admitted, denied, slept, admitted")
		d, err := l.Allow(ctx, Request{Name: "wait", Limits: rule.Limits})
		require.NoError(t, err)
		assert.False(t, d.Allowed, "the waiting call was charged")
	})
}

func TestWaitBeyondBudgetReturnsAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := &countingLimiter{Limiter: newLimiter(WithClock(newManualClock()))}
		rule := &Rule{Name: "budget", Limits: perPeriod(1, time.Minute), Wait: 50 * time.Millisecond}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, "", 1))
		err := rule.Check(ctx, l, "", 1)
		var le *LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, time.Minute, le.RetryAfter)
		assert.Equal(t, int64(2), l.calls.Load(), "no second try: the retry is beyond the wait")
	})
}

func TestWaitNeverPastTheContextDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := &countingLimiter{Limiter: newLimiter(WithClock(newManualClock()))}
		rule := &Rule{Name: "deadline", Limits: perPeriod(1, 10*time.Second), Wait: time.Hour}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, rule.Check(ctx, l, "", 1))
		err := rule.Check(ctx, l, "", 1)
		var le *LimitError
		require.ErrorAs(t, err, &le, "10s is beyond the context's deadline: denied at once")
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, int64(2), l.calls.Load())
	})
}

func TestWaitCancelledReturnsPromptly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := &countingLimiter{Limiter: newLimiter()}
		rule := &Rule{Name: "cancel", Limits: perPeriod(1, time.Minute), Wait: 2 * time.Minute}
		require.NoError(t, rule.Check(context.Background(), l, "", 1))

		// Two waiters: the first at the head of the line, asleep until the
		// window frees; the second queued behind it.
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		errs := make(chan error, 2)
		go func() { errs <- rule.Check(ctx1, l, "", 1) }()
		require.Eventually(t, func() bool { return lineMembers(l, "cancel", "") == 1 }, 5*time.Second, time.Millisecond)
		go func() { errs <- rule.Check(ctx2, l, "", 1) }()
		require.Eventually(t, func() bool { return lineMembers(l, "cancel", "") == 2 }, 5*time.Second, time.Millisecond)
		assert.Equal(t, int64(2), l.calls.Load(), "the second waiter joined the line without asking")

		for _, cancel := range []context.CancelFunc{cancel2, cancel1} {
			cancel()
			select {
			case err := <-errs:
				assert.ErrorIs(t, err, context.Canceled)
				assert.ErrorIs(t, err, ErrLimited)
				var le *LimitError
				require.ErrorAs(t, err, &le)
				assert.Equal(t, "cancel", le.Name)
				assert.Positive(t, le.RetryAfter)
				assert.Contains(t, err.Error(), "context canceled while waiting: ratelimit: cancel exceeded 1 per 1m0s")
			case <-time.After(5 * time.Second):
				t.Fatal("a cancelled waiter did not return")
			}
		}
		assert.Equal(t, 0, lineMembers(l, "cancel", ""), "the line is gone")
		assert.Zero(t, waitLineCount.Load())
	})
}

// lineMembers returns how many calls wait in the line of name and key.
func lineMembers(l Limiter, name, key string) int {
	v, ok := waitLines.Load(lineKeyOf(l, &Request{Name: name, Key: key}))
	if !ok {
		return 0
	}
	line := v.(*waitLine)
	line.mu.Lock()
	defer line.mu.Unlock()
	return line.members
}

func TestWaitUnderContentionCostsAtMostTwoDecisionsPerAdmission(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		l := &countingLimiter{Limiter: newLimiter()}
		const goroutines, calls = 16, 5
		rule := &Rule{Name: "contended", Limits: perPeriod(5, 50*time.Millisecond), Wait: time.Minute}
		var wg sync.WaitGroup
		var admitted atomic.Int64
		for range goroutines {
			wg.Go(func() {
				for range calls {
					if assert.NoError(t, rule.Check(context.Background(), l, "", 1)) {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(goroutines*calls), admitted.Load())
		perAdmission := float64(l.calls.Load()) / float64(admitted.Load())
		t.Logf("%d decisions for %d admissions: %.2f each", l.calls.Load(), admitted.Load(), perAdmission)
		assert.LessOrEqual(t, perAdmission, 2.0)
		assert.Zero(t, waitLineCount.Load(), "every line is gone")
	})
}

// denyingLimiter denies its first denials calls with no RetryAfter, then
// admits.
type denyingLimiter struct {
	denials int64
	calls   atomic.Int64
}

func (l *denyingLimiter) Allow(context.Context, Request) (Decision, error) {
	return Decision{Allowed: l.calls.Add(1) > l.denials}, nil
}

func TestWaitNeverPollsInATightLoop(t *testing.T) {
	// A limiter that denies with no RetryAfter must still not be asked
	// more than once a millisecond: the call retries until admitted, and
	// its 20 retries take at least 20 ms.
	l := &denyingLimiter{denials: 20}
	rule := &Rule{Name: "tight", Limits: perPeriod(1, time.Second), Wait: time.Minute}
	start := time.Now()
	require.NoError(t, rule.Check(context.Background(), l, "", 1))
	elapsed := time.Since(start)
	assert.Equal(t, int64(21), l.calls.Load())
	assert.GreaterOrEqual(t, elapsed, 20*minRetrySleep, "20 retries in %s", elapsed)
}

func TestDelayPacesAnAdmittedCall(t *testing.T) {
	s := &stubLimiter{d: Decision{Allowed: true, Delay: 30 * time.Millisecond}}
	rule := &Rule{Name: "paced", Limits: perPeriod(1, time.Second)}
	start := time.Now()
	require.NoError(t, rule.Check(context.Background(), s, "", 1))
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "slept the delay")

	s.d.Delay = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	err := rule.Check(ctx, s, "", 1)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrLimited)
	assert.Contains(t, err.Error(), "ratelimit: paced: admitted, but context canceled while paced for 1h0m0s")

	shadow := &Rule{Name: "paced", Limits: perPeriod(1, time.Second), Shadow: true}
	assert.NoError(t, shadow.Check(context.Background(), s, "", 1), "a shadow rule does not pace")
}

func TestShadowNeverDeniesAndReportsWouldBeDenials(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...Option) Limiter) {
		metrics := &Metrics{}
		plain := &recordingHook{}
		l := newLimiter(WithClock(newManualClock()), WithHook(Hooks(metrics, plain)))
		rule := &Rule{Name: "shadow", Limits: perPeriod(2, time.Minute), Shadow: true, Wait: time.Minute}
		for range 5 {
			require.NoError(t, rule.Check(context.Background(), l, "", 1))
		}
		assert.Equal(t, Counters{Allowed: 2, ShadowLimited: 3, NearLimit: 1}, metrics.Snapshot()["shadow"])
		assert.Equal(t, 5, plain.decided, "a plain hook sees would-be denials as denials")
		assert.False(t, plain.last.Allowed)

		real := &Rule{Name: "shadow", Limits: perPeriod(2, time.Minute)}
		require.ErrorIs(t, real.Check(context.Background(), l, "", 1), ErrLimited, "the shadow calls were counted")
		assert.Equal(t, uint64(1), metrics.Snapshot()["shadow"].Limited)
	})
}

func TestErrorPolicyWithUnreachableRedis(t *testing.T) {
	limits := perPeriod(1, time.Second)
	cases := []struct {
		name    string
		opts    []Option
		rule    Rule
		allowed bool
	}{
		{"default is fail open", nil, Rule{}, true},
		{"rule fails closed", nil, Rule{OnError: FailClosed}, false},
		{"limiter fails closed", []Option{WithErrorPolicy(FailClosed)}, Rule{}, false},
		{"rule overrides limiter", []Option{WithErrorPolicy(FailClosed)}, Rule{OnError: FailOpen}, true},
		{"unknown policy fails closed", nil, Rule{OnError: "maybe"}, false},
		{"shadow never denies", []Option{WithErrorPolicy(FailClosed)}, Rule{Shadow: true}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hook := &recordingHook{}
			l := NewRedis(newUnreachableClient(t), append(c.opts, WithHook(hook))...)
			rule := c.rule
			rule.Name, rule.Limits = "down", limits
			err := rule.Check(context.Background(), l, "", 1)
			if c.allowed {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrBackend)
				var be *BackendError
				require.ErrorAs(t, err, &be)
				assert.Equal(t, "down", be.Name)
				assert.NotErrorIs(t, err, ErrLimited)
			}
			assert.Equal(t, 1, hook.failed, "the failure is reported either way")
		})
	}
}

func TestErrorPolicyOfALimiterWithoutOne(t *testing.T) {
	s := &stubLimiter{err: &BackendError{Name: "x", Err: errors.New("boom")}}
	rule := &Rule{Name: "x", Limits: perPeriod(1, time.Second)}
	assert.NoError(t, rule.Check(context.Background(), s, "", 1), "fail open")
	rule.OnError = FailClosed
	assert.ErrorIs(t, rule.Check(context.Background(), s, "", 1), ErrBackend)

	// An error that is not a backend failure is returned whatever the policy.
	s.err = errors.New("not a backend failure")
	rule.OnError = FailOpen
	assert.ErrorIs(t, rule.Check(context.Background(), s, "", 1), s.err)
}

func TestErrorPolicyDefaults(t *testing.T) {
	assert.Equal(t, FailOpen, NewMemory().ErrorPolicy())
	assert.Equal(t, FailClosed, NewMemory(WithErrorPolicy(FailClosed)).ErrorPolicy())
	assert.Equal(t, FailClosed, NewRedis(nil, WithErrorPolicy(FailClosed), WithErrorPolicy("")).ErrorPolicy())
}

func TestCancelledContextIsNotFailedOpen(t *testing.T) {
	l := newTestRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rule := &Rule{Name: "gone", Limits: perPeriod(1, time.Second), OnError: FailOpen}
	err := rule.Check(ctx, l, "", 1)
	assert.ErrorIs(t, err, context.Canceled)
}

// BenchmarkWaitContended runs 16 goroutines per core through one waiting
// rule whose limit admits far fewer calls than they make, and reports the
// limiter decisions (Redis commands, for the Redis limiter) spent per
// admitted call.
func BenchmarkWaitContended(b *testing.B) {
	for _, bc := range []struct {
		name string
		new  func(b *testing.B) Limiter
	}{
		{"memory", func(*testing.B) Limiter { return NewMemory() }},
		{"redis", func(b *testing.B) Limiter { return newTestRedis(b) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := &countingLimiter{Limiter: bc.new(b)}
			rule := &Rule{Name: "bench/wait", Limits: perPeriod(200, 20*time.Millisecond), Wait: time.Minute}
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := rule.Check(context.Background(), l, "", 1); err != nil {
						b.Error(err)
					}
				}
			})
			b.ReportMetric(float64(l.calls.Load())/float64(b.N), "decisions/admission")
		})
	}
}

// wrapped is a Wrapper that passes calls on, as a metrics wrapper would.
type wrapped struct{ Limiter }

func (w wrapped) Unwrap() Limiter { return w.Limiter }

func TestWrapperKeepsOverridesAndErrorPolicy(t *testing.T) {
	ov := &mapOverrides{}
	ov.set("wrapped", Limit{Period: time.Minute, Threshold: 1})
	l := wrapped{wrapped{NewMemory(WithOverrides(ov))}}
	rule := &Rule{Name: "wrapped", Limits: perPeriod(5, time.Minute)}
	require.NoError(t, rule.Check(context.Background(), l, "", 1))
	var le *LimitError
	require.ErrorAs(t, rule.Check(context.Background(), l, "", 1), &le, "the override of the wrapped limiter applies")
	assert.Equal(t, int64(1), le.Limit.Threshold)

	down := wrapped{NewRedis(newUnreachableClient(t), WithErrorPolicy(FailClosed))}
	assert.ErrorIs(t, rule.Check(context.Background(), down, "", 1), ErrBackend, "the wrapped limiter fails closed")

	local := wrapped{NewRedis(newUnreachableClient(t), WithErrorPolicy(FailLocal))}
	once := &Rule{Name: "once", Limits: perPeriod(1, time.Minute)}
	assert.NoError(t, once.Check(context.Background(), local, "", 1))
	assert.ErrorIs(t, once.Check(context.Background(), local, "", 1), ErrLimited, "the wrapped limiter's fallback decides")
}
