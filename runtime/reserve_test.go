package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reserveOn returns a memory limiter on a manual clock and a rule of lim.
func reserveOn(lim Limit) (*MemoryLimiter, *manualClock, *Rule) {
	clock := newManualClock()
	return NewMemory(WithClock(clock)), clock, &Rule{Name: "reserve", Limits: []Limit{lim}}
}

func TestReserveIsDeniedAsCheckIs(t *testing.T) {
	ctx := context.Background()
	m, _, r := reserveOn(Limit{Period: time.Second, Threshold: 10})
	res, err := r.Reserve(ctx, m, 8, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(8), res.Units())
	_, err = r.Reserve(ctx, m, 3, "k")
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, int64(2), le.Remaining)
	assert.Equal(t, r.Check(ctx, m, 3, "k"), err, "the same LimitError as Check")
	_, err = r.Reserve(ctx, m, -1, "k")
	require.ErrorAs(t, err, new(*CostError))
}

func TestSettleRefundsAndChargesOnTop(t *testing.T) {
	ctx := context.Background()
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			m, clock, r := reserveOn(Limit{Algorithm: alg, Period: time.Second, Threshold: 10})
			res, err := r.Reserve(ctx, m, 10, "k")
			require.NoError(t, err)
			require.Error(t, r.Check(ctx, m, 1, "k"), "all ten reserved")
			clock.Advance(time.Millisecond)
			require.NoError(t, res.Settle(ctx, 4)) // six back
			require.NoError(t, r.Check(ctx, m, 6, "k"), "the refund is there to take")
			require.Error(t, r.Check(ctx, m, 1, "k"))

			// A second Settle charges nothing and says so.
			err = res.Settle(ctx, 0)
			require.ErrorIs(t, err, ErrInvalidLimit)
			assert.True(t, res.Settled())
			require.Error(t, r.Check(ctx, m, 1, "k"), "nothing refunded")

			// A debt: 5 charged on top of a full limit. Later calls are
			// denied, and their RetryAfter counts the debt.
			clock.Advance(2*time.Second + time.Millisecond) // a fresh window or bucket
			res, err = r.Reserve(ctx, m, 10, "k")
			require.NoError(t, err)
			require.NoError(t, res.Settle(ctx, 15))
			err = r.Check(ctx, m, 1, "k")
			var le *LimitError
			require.ErrorAs(t, err, &le)
			assert.Zero(t, le.Remaining)
			if alg == TokenBucket || alg == GCRA || alg == LeakyBucket {
				// 15 units over a bucket of 10 refilled at 10/s: the first
				// unit frees after 0.6s.
				assert.Equal(t, 600*time.Millisecond, le.RetryAfter)
			}
			clock.Advance(le.RetryAfter)
			require.NoError(t, r.Check(ctx, m, 1, "k"), "admitted once the debt is paid, when the denial said")
		})
	}
}

func TestRefundOfAnEndedWindowGivesNothingBack(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, SlidingLog} {
		t.Run(string(alg), func(t *testing.T) {
			m, clock, r := reserveOn(Limit{Algorithm: alg, Period: time.Second, Threshold: 10})
			clock.Set(time.Unix(1000, 900_000_000)) // 0.1s before a window ends
			res, err := r.Reserve(ctx, m, 10, "k")
			require.NoError(t, err)
			clock.Advance(200 * time.Millisecond) // the window has ended
			require.NoError(t, res.Settle(ctx, 0))
			if alg == SlidingWindow {
				// The ten still weigh 70% in the next window: 7 of 10.
				require.Error(t, r.Check(ctx, m, 4, "k"), "the ended window's count stays")
			} else if alg == SlidingLog {
				require.NoError(t, r.Check(ctx, m, 10, "k"), "a log's units in its window are refunded")
			}
		})
	}
}

func TestRefundNeverFillsABucketBeyondFull(t *testing.T) {
	ctx := context.Background()
	m, clock, r := reserveOn(Limit{Algorithm: TokenBucket, Period: time.Second, Threshold: 10})
	res, err := r.Reserve(ctx, m, 5, "k")
	require.NoError(t, err)
	clock.Advance(400 * time.Millisecond) // 4 of 5 refilled
	require.NoError(t, res.Settle(ctx, 0))
	require.NoError(t, r.Check(ctx, m, 10, "k"), "full")
	require.Error(t, r.Check(ctx, m, 1, "k"), "and no fuller")
}

func TestReserveWithoutABackendThatSettles(t *testing.T) {
	_, err := (&Rule{Name: "x", Limits: []Limit{{Period: time.Second, Threshold: 1}}}).Reserve(context.Background(), foreign{}, 1, "k")
	require.ErrorIs(t, err, ErrInvalidLimit)
}

// foreign is a limiter that cannot settle reservations.
type foreign struct{ decidesOnly }

func (foreign) Allow(context.Context, Request) (Decision, error) { return Decision{Allowed: true}, nil }

func TestReserveFailOpenSettlesNothing(t *testing.T) {
	ctx := context.Background()
	r := &Rule{Name: "x", Limits: []Limit{{Period: time.Second, Threshold: 1}}, OnError: FailOpen}
	res, err := r.Reserve(ctx, failing{}, 1, "k")
	require.NoError(t, err)
	require.NoError(t, res.Settle(ctx, 100))
	r.OnError = FailClosed
	_, err = r.Reserve(ctx, failing{}, 1, "k")
	require.ErrorIs(t, err, ErrBackend)
}

// failing is a backend that settles reservations but never answers.
type failing struct{ foreign }

func (f failing) Do(ctx context.Context, op Op) (Result, error) {
	h := Handlers{Reserve: f.Reserve, Adjust: f.Adjust}
	return h.Do(ctx, f, &op)
}

func (failing) Abilities() Abilities { return Abilities{Ops: OpsOf(OpReserve, OpAdjust)} }

func (failing) Reserve(context.Context, Request) (Decision, time.Time, error) {
	return Decision{}, time.Time{}, &BackendError{Name: "x", Err: errors.New("down")}
}

func (failing) Adjust(context.Context, Request, time.Time, int64) error {
	panic("a reservation nobody charged is settled with nothing")
}

func TestReserveOfARuleWithoutLimits(t *testing.T) {
	ctx := context.Background()
	r := &Rule{Name: "none"}
	_, err := r.Reserve(ctx, NewMemory(), -1, "k")
	require.ErrorAs(t, err, new(*CostError))
	_, err = r.Reserve(ctx, NewMemory(), 1, "k")
	require.ErrorIs(t, err, ErrInvalidLimit)
	r.Limits = []Limit{{Algorithm: "concurrency", Threshold: 1}, {Algorithm: "concurrency", Threshold: 2}}
	_, err = r.Reserve(ctx, NewMemory(), 1, "k")
	require.ErrorIs(t, err, ErrInvalidLimit, "two concurrency limits")
	r.Limits = []Limit{{Algorithm: "concurrency", Threshold: 0}}
	_, err = r.Reserve(ctx, NewMemory(), 1, "k")
	require.ErrorIs(t, err, ErrInvalidLimit)
}

func TestReserveOfAShadowRuleNeverDenies(t *testing.T) {
	ctx := context.Background()
	hook := &shadowCounts{}
	m := NewMemory(WithHook(hook))
	r := &Rule{Name: "shadow", Limits: []Limit{{Period: time.Hour, Threshold: 1}}, Shadow: true}
	a, err := r.Reserve(ctx, m, 1, "k")
	require.NoError(t, err)
	b, err := r.Reserve(ctx, m, 1, "k")
	require.NoError(t, err, "a shadow rule lets the call through")
	require.NoError(t, b.Settle(ctx, 5), "nothing was charged: nothing to settle")
	require.NoError(t, a.Settle(ctx, 0))
	assert.Equal(t, 1, hook.allowed)
	assert.Equal(t, 1, hook.shadowLimited, "the hook tells the would-be denial apart")
	assert.Zero(t, hook.limited)
}

// shadowCounts is a ShadowHook that counts what it is told.
type shadowCounts struct{ allowed, limited, shadowLimited int }

func (h *shadowCounts) Decided(_ context.Context, _ *Request, d Decision) {
	if d.Allowed {
		h.allowed++
	} else {
		h.limited++
	}
}
func (h *shadowCounts) Failed(context.Context, *Request, error) {}
func (h *shadowCounts) ShadowLimited(context.Context, *Request, Decision) {
	h.shadowLimited++
}
