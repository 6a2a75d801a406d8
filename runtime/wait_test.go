package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bookkeeping of waiting calls, which is the same whatever the limiter
// (redislimit's tests run the other wait tests on both backends).

// countingLimiter counts the decisions it asks of the limiter it wraps.
type countingLimiter struct {
	Limiter
	calls atomic.Int64
}

func (c *countingLimiter) Allow(ctx context.Context, req Request) (Decision, error) {
	c.calls.Add(1)
	return c.Limiter.Allow(ctx, req)
}

// Do carries out nothing: the limiter only decides (it queues no calls).
func (c *countingLimiter) Do(_ context.Context, op Op) (Result, error) {
	return Result{}, Unsupported(c, op.Kind)
}

func (c *countingLimiter) Abilities() Abilities { return Abilities{} }

func perPeriod(n int64, period time.Duration) []Limit {
	return []Limit{{Period: period, Threshold: n}}
}

func TestWaitCancelledReturnsPromptly(t *testing.T) {
	{
		l := &countingLimiter{Limiter: NewMemory()}
		rule := &Rule{Name: "cancel", Limits: perPeriod(1, time.Minute), Wait: 2 * time.Minute}
		require.NoError(t, rule.Check(context.Background(), l, 1, ""))

		// Two waiters: the first at the head of the queue, asleep until the
		// window frees; the second queued behind it.
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		errs := make(chan error, 2)
		go func() { errs <- rule.Check(ctx1, l, 1, "") }()
		require.Eventually(t, func() bool { return queueMembers(l, "cancel", "") == 1 }, time.Minute, time.Millisecond)
		go func() { errs <- rule.Check(ctx2, l, 1, "") }()
		require.Eventually(t, func() bool { return queueMembers(l, "cancel", "") == 2 }, time.Minute, time.Millisecond)
		assert.Equal(t, int64(2), l.calls.Load(), "the second waiter joined the queue without asking")

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
			case <-time.After(30 * time.Second): // the window frees after a minute
				t.Fatal("a cancelled waiter did not return")
			}
		}
		assert.Equal(t, 0, queueMembers(l, "cancel", ""), "the queue is gone")
		assert.Zero(t, waitQueueCount.Load())
	}
}

// queueMembers returns how many calls wait in the queue of name and key.
func queueMembers(l Limiter, name, key string) int {
	v, ok := waitQueues.Load(queueKeyOf(l, &Request{Name: name, Key: key}))
	if !ok {
		return 0
	}
	q := v.(*waitQueue)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.members
}

func TestWaitUnderContentionCostsAtMostTwoDecisionsPerAdmission(t *testing.T) {
	{
		l := &countingLimiter{Limiter: NewMemory()}
		const goroutines, calls = 16, 5
		rule := &Rule{Name: "contended", Limits: perPeriod(5, 50*time.Millisecond), Wait: time.Minute}
		var wg sync.WaitGroup
		var admitted atomic.Int64
		for range goroutines {
			wg.Go(func() {
				for range calls {
					if assert.NoError(t, rule.Check(context.Background(), l, 1, "")) {
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
		assert.Zero(t, waitQueueCount.Load(), "every line is gone")
	}
}

// denyingLimiter denies its first denials calls with no RetryAfter, then
// admits.
type denyingLimiter struct {
	decidesOnly
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
	require.NoError(t, rule.Check(context.Background(), l, 1, ""))
	elapsed := time.Since(start)
	assert.Equal(t, int64(21), l.calls.Load())
	assert.GreaterOrEqual(t, elapsed, 20*minRetrySleep, "20 retries in %s", elapsed)
}

// peekingLimiter is a countingLimiter that peeks, and queues no calls:
// its waiting calls wait in its process's order.
type peekingLimiter struct {
	countingLimiter
	m *MemoryLimiter
}

func (p *peekingLimiter) Do(ctx context.Context, op Op) (Result, error) {
	h := Handlers{Peek: p.m.Peek}
	return h.Do(ctx, p, &op)
}

func (p *peekingLimiter) Abilities() Abilities { return Abilities{Ops: OpsOf(OpPeek)} }

// TestPeekOfAWaitRuleTellsWhatItsWaitingCallsWereTold: on a limiter that
// queues no calls, Rule.Peek of a rule with Wait tells, while calls wait
// on the key in this process, the denial they were told last (a new call
// would wait behind them), and the limits' answer once none waits.
func TestPeekOfAWaitRuleTellsWhatItsWaitingCallsWereTold(t *testing.T) {
	m := NewMemory()
	l := &peekingLimiter{countingLimiter{Limiter: m}, m}
	require.False(t, l.Abilities().Can(OpTurn))
	rule := &Rule{Name: "peek/wait", Limits: perPeriod(2, time.Hour), Wait: 2 * time.Hour}
	ctx := t.Context()
	require.NoError(t, rule.Check(ctx, l, 1, "ada"))
	d, err := rule.Peek(ctx, l, "ada")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "a unit is left: %+v", d)
	require.NoError(t, rule.Check(ctx, l, 1, "ada"))

	waiting, stop := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() { errs <- rule.Check(waiting, l, 1, "ada") }()
	require.Eventually(t, func() bool { return queueMembers(l, "peek/wait", "ada") == 1 }, time.Minute, time.Millisecond)
	// The key starts afresh: its limits would admit a call, which would
	// still wait behind the one asleep until its retry.
	require.NoError(t, m.Reset(ctx, rule.Name, "ada"))
	d, err = rule.Peek(ctx, l, "ada")
	require.NoError(t, err)
	assert.False(t, d.Allowed, "a call waits on the key: %+v", d)
	assert.Greater(t, d.RetryAfter, 59*time.Minute, "the waiting call was told an hour: %+v", d)
	other, err := rule.Peek(ctx, l, "grace")
	require.NoError(t, err)
	assert.True(t, other.Allowed, "another key has nobody waiting: %+v", other)

	stop()
	assert.ErrorIs(t, <-errs, context.Canceled)
	d, err = rule.Peek(ctx, l, "ada")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "with nobody waiting, the limits' answer: %+v", d)
}
