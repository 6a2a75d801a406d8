package redislimit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// countingLimiter counts the decisions it asks of the limiter it wraps:
// for the Redis limiter, one per Redis command (one EVALSHA each).
type countingLimiter struct {
	ratelimit.Limiter
	calls atomic.Int64
}

func (c *countingLimiter) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	c.calls.Add(1)
	return c.Limiter.Allow(ctx, req)
}

// Do counts a waiting call's try in its turn (OpTurn) as a decision, as
// Allow is, and passes every operation on.
func (c *countingLimiter) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	if op.Kind == ratelimit.OpTurn {
		c.calls.Add(1)
	}
	return c.Limiter.Do(ctx, op)
}

// stubLimiter answers every call with d and err, counting them.
type stubLimiter struct {
	d     ratelimit.Decision
	err   error
	calls atomic.Int64
}

func (s *stubLimiter) Allow(context.Context, ratelimit.Request) (ratelimit.Decision, error) {
	s.calls.Add(1)
	return s.d, s.err
}

func (s *stubLimiter) Do(_ context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.Unsupported(s, op.Kind)
}

func (s *stubLimiter) Abilities() ratelimit.Abilities { return ratelimit.Abilities{} }

func perPeriod(n int64, period time.Duration) []ratelimit.Limit {
	return []ratelimit.Limit{{Period: period, Threshold: n}}
}

func TestCheckNegativeCostIsATypedError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := &countingLimiter{Limiter: newLimiter()}
		rule := &ratelimit.Rule{Name: "neg", Limits: perPeriod(5, time.Minute), OnError: ratelimit.FailOpen, Shadow: true}
		var err error
		require.NotPanics(t, func() { err = rule.Check(context.Background(), l, -3, "") })
		var ce *ratelimit.CostError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, int64(-3), ce.Cost)
		assert.Equal(t, "neg", ce.Name)
		assert.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
		assert.NotErrorIs(t, err, ratelimit.ErrBackend)
		assert.NotErrorIs(t, err, ratelimit.ErrLimited)
		assert.Equal(t, "ratelimit: neg: cost -3 is negative", err.Error())
		assert.Zero(t, l.calls.Load(), "nothing to ask the limiter")
	})
}

func TestCheckCostAboveThresholdIgnoresPolicyAndShadow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter()
		for _, rule := range []*ratelimit.Rule{
			{Name: "big", Limits: perPeriod(5, time.Minute), OnError: ratelimit.FailOpen},
			{Name: "big", Limits: perPeriod(5, time.Minute), Shadow: true},
		} {
			err := rule.Check(context.Background(), l, 6, "")
			var ce *ratelimit.CostError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
		}
	})
}

func TestCheckCostIsCharged(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		rule := &ratelimit.Rule{Name: "cost", Limits: perPeriod(10, time.Minute)}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, 7, ""))
		require.NoError(t, rule.Check(ctx, l, 3, ""))
		var le *ratelimit.LimitError
		require.ErrorAs(t, rule.Check(ctx, l, 1, ""), &le)
		assert.Zero(t, le.Remaining)
	})
}

func TestCheckSeveralLimitsReportsTheDenyingOne(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		rule := &ratelimit.Rule{Name: "multi", Limits: []ratelimit.Limit{
			{Period: time.Second, Threshold: 10},
			{Period: time.Hour, Threshold: 2},
		}}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, 1, "k"))
		require.NoError(t, rule.Check(ctx, l, 1, "k"))
		var le *ratelimit.LimitError
		require.ErrorAs(t, rule.Check(ctx, l, 1, "k"), &le)
		assert.Equal(t, rule.Limits[1], le.Limit)
		assert.Equal(t, time.Hour, le.RetryAfter)
	})
}

// pacedLimiter moves clock on by the RetryAfter of each denial it
// returns, so that a waiting call's sleep of RetryAfter ends when the limit
// frees on clock, however much longer the sleep really takes.
type pacedLimiter struct {
	ratelimit.Limiter
	clock *manualClock
}

func (p *pacedLimiter) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	d, err := p.Limiter.Allow(ctx, req)
	if err == nil && !d.Allowed {
		p.clock.Advance(d.RetryAfter)
	}
	return d, err
}

// Do advances the clock past a denied try in its turn (OpTurn), as Allow
// does, and passes every operation on.
func (p *pacedLimiter) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	res, err := p.Limiter.Do(ctx, op)
	if op.Kind == ratelimit.OpTurn && err == nil && !res.Decision.Allowed {
		p.clock.Advance(res.Decision.RetryAfter)
	}
	return res, err
}

func TestWaitIsAdmittedAfterSleeping(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		l := &countingLimiter{Limiter: &pacedLimiter{Limiter: newLimiter(ratelimit.WithClock(clock)), clock: clock}}
		rule := &ratelimit.Rule{Name: "wait", Limits: perPeriod(1, 50*time.Millisecond), Wait: 5 * time.Second}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, 1, ""))
		require.NoError(t, rule.Check(ctx, l, 1, ""), "admitted once the first call left the window")
		assert.Equal(t, int64(3), l.calls.Load(), "admitted, denied, slept, admitted")
		d, err := l.Allow(ctx, ratelimit.Request{Name: "wait", Limits: rule.Limits})
		require.NoError(t, err)
		assert.False(t, d.Allowed, "the waiting call was charged")
	})
}

func TestWaitBeyondBudgetReturnsAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := &countingLimiter{Limiter: newLimiter(ratelimit.WithClock(newManualClock()))}
		rule := &ratelimit.Rule{Name: "budget", Limits: perPeriod(1, time.Minute), Wait: 50 * time.Millisecond}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, 1, ""))
		err := rule.Check(ctx, l, 1, "")
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, time.Minute, le.RetryAfter)
		assert.Equal(t, int64(2), l.calls.Load(), "no second try: the retry is beyond the wait")
	})
}

func TestWaitNeverPastTheContextDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := &countingLimiter{Limiter: newLimiter(ratelimit.WithClock(newManualClock()))}
		rule := &ratelimit.Rule{Name: "deadline", Limits: perPeriod(1, 10*time.Second), Wait: time.Hour}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, rule.Check(ctx, l, 1, ""))
		err := rule.Check(ctx, l, 1, "")
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le, "10s is beyond the context's deadline: denied at once")
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, int64(2), l.calls.Load())
	})
}

func TestDelayPacesAnAdmittedCall(t *testing.T) {
	s := &stubLimiter{d: ratelimit.Decision{Allowed: true, Delay: 30 * time.Millisecond}}
	rule := &ratelimit.Rule{Name: "paced", Limits: perPeriod(1, time.Second)}
	start := time.Now()
	require.NoError(t, rule.Check(context.Background(), s, 1, ""))
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "slept the delay")

	s.d.Delay = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	err := rule.Check(ctx, s, 1, "")
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ratelimit.ErrLimited)
	assert.Contains(t, err.Error(), "ratelimit: paced: admitted, but context canceled while paced for 1h0m0s")

	shadow := &ratelimit.Rule{Name: "paced", Limits: perPeriod(1, time.Second), Shadow: true}
	assert.NoError(t, shadow.Check(context.Background(), s, 1, ""), "a shadow rule does not pace")
}

func TestShadowNeverDeniesAndReportsWouldBeDenials(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		metrics := &limitmetrics.Metrics{}
		plain := &recordingHook{}
		l := newLimiter(ratelimit.WithClock(newManualClock()), ratelimit.WithHook(metrics, plain))
		rule := &ratelimit.Rule{Name: "shadow", Limits: perPeriod(2, time.Minute), Shadow: true, Wait: time.Minute}
		for range 5 {
			require.NoError(t, rule.Check(context.Background(), l, 1, ""))
		}
		assert.Equal(t, limitmetrics.Counters{Allowed: 2, ShadowLimited: 3, NearLimit: 1}, metrics.Snapshot()["shadow"])
		assert.Equal(t, 5, plain.decided, "a plain hook sees would-be denials as denials")
		assert.False(t, plain.last.Allowed)

		real := &ratelimit.Rule{Name: "shadow", Limits: perPeriod(2, time.Minute)}
		require.ErrorIs(t, real.Check(context.Background(), l, 1, ""), ratelimit.ErrLimited, "the shadow calls were counted")
		assert.Equal(t, uint64(1), metrics.Snapshot()["shadow"].Limited)
	})
}

func TestErrorPolicyWithUnreachableRedis(t *testing.T) {
	limits := perPeriod(1, time.Second)
	cases := []struct {
		name    string
		opts    []Option
		rule    ratelimit.Rule
		allowed bool
	}{
		{"default is fail open", nil, ratelimit.Rule{}, true},
		{"rule fails closed", nil, ratelimit.Rule{OnError: ratelimit.FailClosed}, false},
		{"limiter fails closed", []Option{ratelimit.WithErrorPolicy(ratelimit.FailClosed)}, ratelimit.Rule{}, false},
		{"rule overrides limiter", []Option{ratelimit.WithErrorPolicy(ratelimit.FailClosed)}, ratelimit.Rule{OnError: ratelimit.FailOpen}, true},
		{"unknown policy fails closed", nil, ratelimit.Rule{OnError: "maybe"}, false},
		{"shadow never denies", []Option{ratelimit.WithErrorPolicy(ratelimit.FailClosed)}, ratelimit.Rule{Shadow: true}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hook := &recordingHook{}
			l := New(newUnreachableClient(t), append(c.opts, ratelimit.WithHook(hook))...)
			rule := c.rule
			rule.Name, rule.Limits = "down", limits
			err := rule.Check(context.Background(), l, 1, "")
			if c.allowed {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ratelimit.ErrBackend)
				var be *ratelimit.BackendError
				require.ErrorAs(t, err, &be)
				assert.Equal(t, "down", be.Name)
				assert.NotErrorIs(t, err, ratelimit.ErrLimited)
			}
			assert.Equal(t, 1, hook.failed, "the failure is reported either way")
		})
	}
}

func TestErrorPolicyOfALimiterWithoutOne(t *testing.T) {
	s := &stubLimiter{err: &ratelimit.BackendError{Name: "x", Err: errors.New("boom")}}
	rule := &ratelimit.Rule{Name: "x", Limits: perPeriod(1, time.Second)}
	assert.ErrorIs(t, rule.Check(context.Background(), s, 1, ""), ratelimit.ErrBackend, "FailLocal without a fallback: fail closed")
	rule.OnError = ratelimit.FailOpen
	assert.NoError(t, rule.Check(context.Background(), s, 1, ""), "fail open, when asked")
	rule.OnError = ratelimit.FailClosed
	assert.ErrorIs(t, rule.Check(context.Background(), s, 1, ""), ratelimit.ErrBackend)

	// An error that is not a backend failure is returned whatever the policy.
	s.err = errors.New("not a backend failure")
	rule.OnError = ratelimit.FailOpen
	assert.ErrorIs(t, rule.Check(context.Background(), s, 1, ""), s.err)
}

func TestErrorPolicyDefaults(t *testing.T) {
	assert.Equal(t, ratelimit.FailLocal, ratelimit.NewMemory().Abilities().Config.ErrorPolicy)
	assert.Equal(t, ratelimit.FailClosed, ratelimit.NewMemory(ratelimit.WithErrorPolicy(ratelimit.FailClosed)).Abilities().Config.ErrorPolicy)
	assert.Equal(t, ratelimit.FailClosed, New(nil, ratelimit.WithErrorPolicy(ratelimit.FailClosed), ratelimit.WithErrorPolicy("")).Config().ErrorPolicy)
}

func TestCancelledContextIsNotFailedOpen(t *testing.T) {
	l := newTestRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rule := &ratelimit.Rule{Name: "gone", Limits: perPeriod(1, time.Second), OnError: ratelimit.FailOpen}
	err := rule.Check(ctx, l, 1, "")
	assert.ErrorIs(t, err, context.Canceled)
}

// BenchmarkWaitContended runs 16 goroutines per core through one waiting
// rule whose limit admits far fewer calls than they make, and reports the
// limiter decisions (Redis commands, for the Redis limiter) spent per
// admitted call.
func BenchmarkWaitContended(b *testing.B) {
	for _, bc := range []struct {
		name string
		new  func(b *testing.B) ratelimit.Limiter
	}{
		{"memory", func(*testing.B) ratelimit.Limiter { return ratelimit.NewMemory() }},
		{"redis", func(b *testing.B) ratelimit.Limiter { return newTestRedis(b) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := &countingLimiter{Limiter: bc.new(b)}
			rule := &ratelimit.Rule{Name: "bench/wait", Limits: perPeriod(200, 20*time.Millisecond), Wait: time.Minute}
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := rule.Check(context.Background(), l, 1, ""); err != nil {
						b.Error(err)
					}
				}
			})
			b.ReportMetric(float64(l.calls.Load())/float64(b.N), "decisions/admission")
		})
	}
}

// wrapped is a Wrapper that passes calls on, as a metrics wrapper would.
type wrapped struct{ ratelimit.Limiter }

func (w wrapped) Unwrap() ratelimit.Limiter { return w.Limiter }

func TestWrapperKeepsOverridesAndErrorPolicy(t *testing.T) {
	ov := &mapOverrides{}
	ov.set("wrapped", ratelimit.Limit{Period: time.Minute, Threshold: 1})
	l := wrapped{wrapped{ratelimit.NewMemory(ratelimit.WithOverrides(ov))}}
	rule := &ratelimit.Rule{Name: "wrapped", Limits: perPeriod(5, time.Minute)}
	require.NoError(t, rule.Check(context.Background(), l, 1, ""))
	var le *ratelimit.LimitError
	require.ErrorAs(t, rule.Check(context.Background(), l, 1, ""), &le, "the override of the wrapped limiter applies")
	assert.Equal(t, int64(1), le.Limit.Threshold)

	down := wrapped{New(newUnreachableClient(t), ratelimit.WithErrorPolicy(ratelimit.FailClosed))}
	assert.ErrorIs(t, rule.Check(context.Background(), down, 1, ""), ratelimit.ErrBackend, "the wrapped limiter fails closed")

	local := wrapped{New(newUnreachableClient(t), ratelimit.WithErrorPolicy(ratelimit.FailLocal))}
	once := &ratelimit.Rule{Name: "once", Limits: perPeriod(1, time.Minute)}
	assert.NoError(t, once.Check(context.Background(), local, 1, ""))
	assert.ErrorIs(t, once.Check(context.Background(), local, 1, ""), ratelimit.ErrLimited, "the wrapped limiter's fallback decides")
}
