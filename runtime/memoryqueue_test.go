package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQueuedRetryIsTheSoonestTheCallCouldBeAdmitted: the RetryAfter that
// AllowInTurn tells a call behind others (soonest) is never later than
// the call could be admitted: after random calls, a call of random units
// behind a random number of calls of a unit is told a retry; then the
// calls ahead and it are admitted in turn, each as soon as the limits
// admit it (the clock moving a millisecond at a time), and the call is
// admitted no sooner than it was told. For every algorithm, one limit and
// two.
func TestQueuedRetryIsTheSoonestTheCallCouldBeAdmitted(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 28))
	algs := Algorithms()
	randomLimit := func() Limit {
		lim := Limit{Algorithm: algs[rng.IntN(len(algs))], Period: time.Duration(20+rng.IntN(200)) * time.Millisecond, Threshold: int64(1 + rng.IntN(5))}
		switch lim.Algorithm {
		case TokenBucket, GCRA:
			lim.Burst = lim.Threshold + int64(rng.IntN(3))
		case LeakyBucket:
			lim.Capacity = lim.Threshold + int64(rng.IntN(3))
		}
		return lim
	}
	told := 0
	for n := range 300 {
		limits := []Limit{randomLimit()}
		if n%3 == 0 {
			limits = append(limits, randomLimit())
		}
		clock := newManualClock()
		l := NewMemory(WithClock(clock))
		name := fmt.Sprint("soonest/", n)
		call := func(units int64) Request {
			return Request{Name: name, Cost: units, Limits: limits}
		}
		for range rng.IntN(12) { // some history
			_, _ = l.Allow(ctx, call(1))
			clock.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
		}
		most := limits[0].MaxCost()
		for _, lim := range limits {
			most = min(most, lim.MaxCost())
		}
		units, ahead := 1+rng.Int64N(most), rng.IntN(8)
		d, err := soonest(ctx, l, call(units), ahead)
		require.NoError(t, err)
		began := clock.Now()
		for i := 0; i <= ahead; i++ {
			u := int64(1)
			if i == ahead {
				u = units
			}
			for {
				got, err := l.Allow(ctx, call(u))
				require.NoError(t, err)
				if got.Allowed {
					break
				}
				clock.Advance(time.Millisecond)
				require.Less(t, clock.Now().Sub(began), time.Hour, "case %d: never admitted", n)
			}
		}
		admitted := clock.Now().Sub(began)
		require.LessOrEqual(t, d.RetryAfter, admitted,
			"case %d: %v, %d units behind %d calls: told %s, admitted after %s", n, limits, units, ahead, d.RetryAfter, admitted)
		if d.RetryAfter > 0 {
			told++
		}
	}
	t.Logf("%d of 300 calls were told to wait", told)
}

// TestQueueHoldsAtMostMaxQueuePlaces: a call denied while MaxQueue calls
// wait gets no place, and its denial is returned (Check returns it at
// once); one place freed, a call gets one again.
func TestQueueHoldsAtMostMaxQueuePlaces(t *testing.T) {
	ctx := context.Background()
	l := NewMemory(WithClock(newManualClock()))
	req := Request{Name: "full", Limits: []Limit{{Algorithm: GCRA, Period: time.Hour, Threshold: 1_000_000}}}
	used := req
	used.Cost = 1_000_000
	_, err := l.Allow(ctx, used)
	require.NoError(t, err)
	var last int64
	for range MaxQueue {
		d, held, _, err := l.AllowInTurn(ctx, req, 0, 2*time.Hour)
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.Greater(t, held, last)
		last = held
	}
	d, held, _, err := l.AllowInTurn(ctx, req, 0, 2*time.Hour)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Zero(t, held, "a place past MaxQueue")
	require.NoError(t, l.Dequeue(ctx, req, last))
	_, held, _, err = l.AllowInTurn(ctx, req, 0, 2*time.Hour)
	require.NoError(t, err)
	require.NotZero(t, held, "a place once one was freed")
}
