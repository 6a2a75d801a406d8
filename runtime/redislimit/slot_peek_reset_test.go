package redislimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestPeekOfASlotRule peeks at a rule with a rate limit and a concurrency
// limit on every backend, on a pinned clock: the slot's numbers when it is
// the tightest limit or full, the rate limit's otherwise, and nothing
// taken or charged.
func TestPeekOfASlotRule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		clock := newManualClock()
		l := newLimiter(ratelimit.WithClock(clock))
		slot := concurrencyLimit(2, time.Minute)
		r := &ratelimit.Rule{Name: "peek-slots", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, slot}}

		d, err := r.Peek(ctx, l, "t")
		require.NoError(t, err)
		assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2, LimitIndex: 1}, d, "all slots free: the slot is the tightest, and has all its units")

		a, err := r.Reserve(ctx, l, 1, "t")
		require.NoError(t, err)
		clock.Advance(10 * time.Second)
		d, err = r.Peek(ctx, l, "t")
		require.NoError(t, err)
		assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 1, ResetAfter: time.Minute, LimitIndex: 1}, d, "one slot of two free")
		b, err := r.Reserve(ctx, l, 1, "t")
		require.NoError(t, err)

		d, err = r.Peek(ctx, l, "t")
		require.NoError(t, err)
		assert.Equal(t, ratelimit.Decision{RetryAfter: 50 * time.Second, ResetAfter: time.Minute, LimitIndex: 1}, d, "full: the soonest and the last lease's end")
		d, err = ratelimit.Peek(ctx, l, ratelimit.Request{Name: r.Name, Key: "t", Limits: []ratelimit.Limit{slot, r.Limits[0]}})
		require.NoError(t, err)
		assert.Equal(t, 0, d.LimitIndex, "the slot's index among the request's limits")
		assert.False(t, d.Allowed)
		_, err = r.Reserve(ctx, l, 1, "t")
		require.ErrorIs(t, err, ratelimit.ErrLimited, "the peek agrees with a reservation")

		require.NoError(t, a.Release(ctx))
		d, err = ratelimit.Peek(ctx, l, ratelimit.Request{Name: r.Name, Key: "t", Cost: 8, Limits: r.Limits})
		require.NoError(t, err)
		assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 8, ResetAfter: time.Hour, LimitIndex: 0}, d,
			"8 of the 8 units left: fewer after the call than the slots, so the rate limit is the tightest")
		d, err = ratelimit.Peek(ctx, l, ratelimit.Request{Name: r.Name, Key: "t", Cost: 9, Limits: r.Limits})
		require.NoError(t, err)
		assert.False(t, d.Allowed, "9 units of the 8 left")
		assert.Equal(t, 0, d.LimitIndex)

		// Nothing was taken or charged by the peeks: one slot and 8 units left.
		c, err := r.Reserve(ctx, l, 8, "t")
		require.NoError(t, err)
		_, err = r.Reserve(ctx, l, 1, "u")
		require.NoError(t, err, "slots are per key")
		require.NoError(t, c.Release(ctx))
		require.NoError(t, b.Release(ctx))

		// A rule with only a slot, exempted or not.
		only := &ratelimit.Rule{Name: "only-slot", Limits: []ratelimit.Limit{slot}}
		d, err = only.Peek(ctx, l, "t")
		require.NoError(t, err)
		assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2, LimitIndex: 0}, d)
	})
}

// TestResetFreesTheSlots resets a key whose slots are all held, on every
// backend: new calls get slots at once, and the calls that held them give
// back nothing of the new calls' when they return.
func TestResetFreesTheSlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		clock := newManualClock()
		l := newLimiter(ratelimit.WithClock(clock))
		r := &ratelimit.Rule{Name: "reset-slots", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, concurrencyLimit(2, time.Minute)}}
		var old []*ratelimit.Reservation
		for range 2 {
			res, err := r.Reserve(ctx, l, 1, "t")
			require.NoError(t, err)
			old = append(old, res)
		}
		other, err := r.Reserve(ctx, l, 1, "u")
		require.NoError(t, err)
		_, err = r.Reserve(ctx, l, 1, "t")
		require.ErrorIs(t, err, ratelimit.ErrLimited)

		require.NoError(t, r.Reset(ctx, l, "t"))
		d, err := r.Peek(ctx, l, "t")
		require.NoError(t, err)
		assert.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2, LimitIndex: 1}, d, "a reset key has every slot free")
		var fresh []*ratelimit.Reservation
		for range 2 {
			res, err := r.Reserve(ctx, l, 1, "t")
			require.NoError(t, err, "the reset freed the slots")
			fresh = append(fresh, res)
		}
		for _, res := range old {
			require.NoError(t, res.Release(ctx), "the old calls give back slots that are gone")
		}
		_, err = r.Reserve(ctx, l, 1, "t")
		require.ErrorIs(t, err, ratelimit.ErrLimited, "the old calls' give-back freed none of the new calls' slots")
		d, err = r.Peek(ctx, l, "u")
		require.NoError(t, err)
		assert.Equal(t, int64(1), d.Remaining, "another key's slots are kept")
		require.NoError(t, other.Release(ctx))
		for _, res := range fresh {
			require.NoError(t, res.Release(ctx))
		}
	})
}

// failedHook counts the failures a limiter reports.
type failedHook struct {
	mu     sync.Mutex
	failed []error
}

func (h *failedHook) Decided(context.Context, *ratelimit.Request, ratelimit.Decision) {}

func (h *failedHook) Failed(_ context.Context, _ *ratelimit.Request, err error) {
	h.mu.Lock()
	h.failed = append(h.failed, err)
	h.mu.Unlock()
}

func (h *failedHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.failed)
}

// TestFailedGiveBackIsReportedOnce gives slots back through a client that
// can no longer reach Redis: Release and Settle return the failure, the
// hook is told of each once (again or not, a reservation gives back once),
// and the slot stays held until its lease ends.
func TestFailedGiveBackIsReportedOnce(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	hook := &failedHook{}
	srv.Flush(t)
	c := srv.Client()
	l := newTest(c, WithDenyCache(0), withoutHeartbeat(), ratelimit.WithClock(clock), ratelimit.WithHook(hook))
	r := &ratelimit.Rule{Name: "lost-give-back", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, concurrencyLimit(2, time.Minute)}}
	a, err := r.Reserve(ctx, l, 1, "t")
	require.NoError(t, err)
	b, err := r.Reserve(ctx, l, 1, "t")
	require.NoError(t, err)
	require.NoError(t, c.Close()) // Redis is out of reach

	err = a.Release(ctx)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	assert.Equal(t, 1, hook.count(), "the failed give-back is reported")
	require.NoError(t, a.Release(ctx), "a reservation gives back once")
	assert.Equal(t, 1, hook.count(), "and is reported once")
	err = b.Settle(ctx, 1)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	n := hook.count()
	assert.GreaterOrEqual(t, n, 2, "the failed settle is reported")
	require.NoError(t, b.Release(ctx))
	assert.Equal(t, n, hook.count(), "a settled reservation gives back nothing more")

	// Both slots stay held, unrenewed, until their lease ends.
	c2 := rdb(t)
	l2 := newTest(c2, WithDenyCache(0), withoutHeartbeat(), ratelimit.WithClock(clock))
	_, err = r.Reserve(ctx, l2, 1, "t")
	require.ErrorIs(t, err, ratelimit.ErrLimited, "a slot not given back is held")
	clock.Advance(time.Minute)
	res, err := r.Reserve(ctx, l2, 1, "t")
	require.NoError(t, err, "its lease ended")
	require.NoError(t, res.Release(ctx))
}
