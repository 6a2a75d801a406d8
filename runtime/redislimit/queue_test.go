package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestQueueAgreesWithTheTwin: on one clock, after the same random calls,
// the queue script and its twin (MemoryLimiter.AllowInTurn) give a line
// of waiters the same decisions, places and retries: the first decided,
// the others told when they could be admitted behind it, for random
// limits of every algorithm, one and two per call, a cost of one unit or
// more, and calls coming back when told.
func TestQueueAgreesWithTheTwin(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(28, 11))
	algs := ratelimit.Algorithms()
	randomLimit := func() ratelimit.Limit {
		lim := ratelimit.Limit{Algorithm: algs[rng.IntN(len(algs))], Period: time.Duration(20+rng.IntN(500)) * time.Millisecond, Threshold: int64(1 + rng.IntN(5))}
		switch lim.Algorithm {
		case ratelimit.TokenBucket, ratelimit.GCRA:
			lim.Burst = lim.Threshold + int64(rng.IntN(3))
		case ratelimit.LeakyBucket:
			lim.Capacity = lim.Threshold + int64(rng.IntN(3))
		}
		return lim
	}
	clock := newManualClock()
	red := newTestRedis(t, ratelimit.WithClock(clock))
	twin := ratelimit.NewMemory(ratelimit.WithClock(clock))
	both := []queuer{twin, red}
	for n := range 150 {
		limits := []ratelimit.Limit{randomLimit()}
		if n%3 == 0 {
			limits = append(limits, randomLimit())
		}
		most := limits[0].MaxCost()
		for _, lim := range limits {
			most = min(most, lim.MaxCost())
		}
		req := ratelimit.Request{Name: fmt.Sprint("queue-twin/", n), Key: "k", Cost: 1 + rng.Int64N(most), Limits: limits}
		for range 1 + rng.IntN(8) { // some history, used up at the end
			for _, l := range both {
				_, err := l.Allow(ctx, req)
				require.NoError(t, err)
			}
			clock.Advance(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
		tickets := make([][2]int64, 1+rng.IntN(5)) // per waiter, per limiter
		for step := range 3 * len(tickets) {
			w := step % len(tickets)
			var got [2]ratelimit.Decision
			for i, l := range both {
				d, held, at, err := l.AllowInTurn(ctx, req, tickets[w][i], time.Hour)
				require.NoError(t, err)
				got[i], tickets[w][i] = d, held
				require.Equal(t, d.Allowed, !at.IsZero())
			}
			require.Equal(t, got[0], got[1], "case %d (%v, cost %d), waiter %d, step %d", n, limits, req.Cost, w, step)
			require.Equal(t, tickets[w][0], tickets[w][1], "case %d: the places differ", n)
			if !got[0].Allowed {
				clock.Advance(min(got[0].RetryAfter, time.Duration(rng.IntN(200))*time.Millisecond))
			}
		}
		for _, ts := range tickets { // leave nothing waiting for the next case's clock
			for i, l := range both {
				require.NoError(t, l.Dequeue(ctx, req, ts[i]))
			}
		}
	}
}

// TestSlotQueueAgreesWithTheTwin: as TestQueueAgreesWithTheTwin, for
// calls that wait for a concurrency slot (ReserveSlotInTurn), alone or
// with a rate limit: while the slots free at random, the queue script's
// slot form and its twin give waiters coming back in any order the same
// decisions, places and retries, and a waiter behind others takes a slot
// while more are free than calls are ahead of it.
func TestSlotQueueAgreesWithTheTwin(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(28, 12))
	clock := newManualClock()
	red := newTestRedis(t, ratelimit.WithClock(clock))
	twin := ratelimit.NewMemory(ratelimit.WithClock(clock))
	both := []interface {
		queuer
		slotHolder
	}{twin, red}
	overtook := 0 // admissions of a waiter with an earlier one still waiting
	for n := range 100 {
		slot := concurrencyLimit(int64(1+rng.IntN(3)), time.Minute)
		req := ratelimit.Request{Name: fmt.Sprint("slot-queue-twin/", n), Key: "k"}
		if n%2 == 0 {
			req.Limits = []ratelimit.Limit{{Period: time.Second, Threshold: slot.Threshold + int64(1+rng.IntN(5))}}
		}
		var held []string // the tokens of the slots held, the same on both
		for i := range slot.Threshold {
			token := fmt.Sprint("first-", i)
			for _, l := range both {
				d, _, err := l.ReserveSlot(ctx, req, slot, token)
				require.NoError(t, err)
				require.True(t, d.Allowed)
			}
			held = append(held, token)
		}
		tickets := make([][2]int64, 2+rng.IntN(4)) // per waiter, per limiter
		for step := range 4 * len(tickets) {
			for range rng.IntN(3) { // slots free
				if len(held) == 0 {
					break
				}
				k := rng.IntN(len(held))
				for _, l := range both {
					require.NoError(t, l.ReleaseSlot(ctx, req, slot, held[k]))
				}
				held = append(held[:k], held[k+1:]...)
			}
			w := rng.IntN(len(tickets)) // in any order: one behind others may come first
			token := fmt.Sprint("waiter-", step)
			var got [2]ratelimit.Decision
			ticket := tickets[w][0]
			for i, l := range both {
				d, place, at, err := l.ReserveSlotInTurn(ctx, req, slot, token, tickets[w][i], time.Hour)
				require.NoError(t, err)
				got[i], tickets[w][i] = d, place
				require.Equal(t, d.Allowed, !at.IsZero())
			}
			require.Equal(t, got[0], got[1], "case %d (%d slots, limits %v), waiter %d, step %d", n, slot.Threshold, req.Limits, w, step)
			require.Equal(t, tickets[w][0], tickets[w][1], "case %d: the places differ", n)
			if got[0].Allowed {
				held = append(held, token)
				for _, other := range tickets {
					if ticket != 0 && other[0] != 0 && other[0] < ticket {
						overtook++
						break
					}
				}
			} else {
				clock.Advance(min(got[0].RetryAfter, time.Duration(rng.IntN(30))*time.Millisecond))
			}
		}
		for _, ts := range tickets { // leave nothing waiting
			for i, l := range both {
				require.NoError(t, l.Dequeue(ctx, req, ts[i]))
			}
		}
	}
	assert.Positive(t, overtook, "no waiter behind others took a free slot")
	t.Logf("%d admissions of a waiter behind others", overtook)
}

// TestQueueKeysAreSmall: a queue's keys take a small bounded amount of
// Redis memory per waiting call, whatever key a caller sends (a long one
// is kept as its stand-in); MaxQueue bounds the places.
func TestQueueKeysAreSmall(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	l := newTestRedis(t, ratelimit.WithClock(clock))
	req := ratelimit.Request{Name: "queue-memory", Key: strings.Repeat("k", 200), Limits: []ratelimit.Limit{{Algorithm: ratelimit.GCRA, Period: time.Hour, Threshold: 1000}}}
	used := req
	used.Cost = 1000
	_, err := l.Allow(ctx, used)
	require.NoError(t, err)
	measure := func() float64 {
		bounded := req
		bounded.Key = callkey.Bound(req.Key) // as Redis keeps it: a stand-in
		order := l.queueKey(&bounded)
		var bytes int64
		for _, k := range []string{order, order + ":due"} {
			n, err := srv.Client().MemoryUsage(ctx, k).Result()
			require.NoError(t, err)
			bytes += n
		}
		return float64(bytes)
	}
	// Up to 128 places Redis keeps both keys packed (listpacks); past
	// that, as a skiplist and a hash table.
	for _, places := range []int{100, 200} {
		for range 100 { // places in all
			d, held, _, err := l.AllowInTurn(ctx, req, 0, 2*time.Hour)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.NotZero(t, held)
		}
		perPlace := measure() / float64(places)
		t.Logf("%d places: %.1f bytes each", places, perPlace)
		assert.Less(t, perPlace, 160.0, "bytes per waiting call")
	}
}

// TestWaitingCallsOfALeasedLineUseTheLease: a rule with a wait and a
// leased line (prefetch=) waits in its process's order, its calls admitted
// from the process's leases as without a wait (AllowInTurn declines
// them), not each decided in Redis.
func TestWaitingCallsOfALeasedLineUseTheLease(t *testing.T) {
	ctx := context.Background()
	l := newTestRedis(t)
	r := &ratelimit.Rule{Name: "queue-leased", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 10_000, Prefetch: time.Second}}, Wait: time.Second}
	_, _, _, err := l.AllowInTurn(ctx, ratelimit.Request{Name: r.Name, Limits: r.Limits, Rule: r}, 0, time.Second)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	for range 200 {
		require.NoError(t, r.Check(ctx, l, 1))
	}
	leases, served := l.Leases().Stats()
	t.Logf("%d leases served %d calls", leases, served)
	assert.Positive(t, served, "no call was admitted from a lease")
}

// queuer is what the queue tests call of the memory limiter and the
// Redis limiter alike: the methods behind OpTurn, OpSlotTurn, OpDequeue
// and OpWaiting.
type queuer interface {
	Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error)
	AllowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error)
	ReserveSlotInTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error)
	Dequeue(ctx context.Context, req ratelimit.Request, ticket int64) error
	Waiting(ctx context.Context, req ratelimit.Request) (int, time.Duration, error)
}
