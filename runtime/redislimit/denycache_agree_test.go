package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestDenyCacheAnswersAsRedisWould runs one random sequence of calls
// (gaps, keys, costs, and which of three processes makes each call: three
// limiters, each with a deny cache of its own) twice on a pinned clock,
// with the caches on and with them off, for every algorithm alone and in
// a pair: every decision agrees in every field but Source.
func TestDenyCacheAnswersAsRedisWould(t *testing.T) {
	sets := map[string][]ratelimit.Limit{}
	for _, alg := range ratelimit.Algorithms() {
		sets[string(alg)] = []ratelimit.Limit{{Algorithm: alg, Period: 200 * time.Millisecond, Threshold: 4}}
	}
	sets["fixed_window+token_bucket"] = []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 6},
		{Algorithm: ratelimit.TokenBucket, Period: 100 * time.Millisecond, Threshold: 2, Burst: 3},
	}
	sets["sliding_log+gcra"] = []ratelimit.Limit{
		{Period: 300 * time.Millisecond, Threshold: 5},
		{Algorithm: ratelimit.GCRA, Period: 50 * time.Millisecond, Threshold: 1, Burst: 2},
	}
	total := 0
	for name, limits := range sets {
		t.Run(name, func(t *testing.T) {
			repeated := 0
			for seed := range uint64(3) {
				untilCalm(t, stalledMsg, func() bool {
					n, calm := cacheAgrees(t, limits, seed)
					repeated += n
					return calm
				})
			}
			t.Logf("%s: %d denials repeated from a cache", name, repeated)
			assert.GreaterOrEqual(t, repeated, 100, "denials the caches repeated")
			total += repeated
		})
	}
	assert.GreaterOrEqual(t, total, 1000)
}

// cacheAgrees runs seed's sequence for TestDenyCacheAnswersAsRedisWould
// and returns how many denials the caches repeated, and false if the
// sequence stalled in real time before it ended.
func cacheAgrees(t *testing.T, limits []ratelimit.Limit, seed uint64) (repeated int, calm bool) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(limits))))
	clock := newManualClock()
	c := rdb(t)
	srv.Flush(t)
	var on, off [3]*Limiter
	for i := range on {
		on[i] = newTest(c, ratelimit.WithClock(clock), WithPrefix("on:"), WithDenyCache(64), WithBatching(0), withoutHeartbeat())
		off[i] = newTest(c, ratelimit.WithClock(clock), WithPrefix("off:"), WithDenyCache(0), WithBatching(0), withoutHeartbeat())
	}
	guard := newRealTimeGuard(clock, limits...)
	capacity := limits[0].MaxCost()
	for _, l := range limits {
		capacity = min(capacity, l.MaxCost())
	}
	for i := range 1000 {
		clock.Advance(time.Duration(rng.Int64N(int64(limits[0].Period/us)/8+1)) * us)
		cost := int64(1)
		if rng.IntN(4) == 0 {
			cost = 1 + rng.Int64N(capacity)
		}
		p := rng.IntN(len(on))
		req := ratelimit.Request{Name: "agree", Key: fmt.Sprint("k", rng.IntN(2)), Cost: cost, Limits: limits}
		guard.start()
		want, got := allow(t, off[p], req), allow(t, on[p], req)
		if guard.stalled() {
			return 0, false
		}
		if got.Source == ratelimit.SourceCache {
			repeated++
			got.Source = ratelimit.SourceBackend
		}
		require.Equal(t, want, got, "seed %d call %d by process %d at %s: %+v", seed, i, p, clock.Now().Format(time.StampMicro), req)
	}
	return repeated, true
}

// TestDenyCacheReproOfTheIssue: a token bucket of 10 a second, calls at
// 0 ms (cost 7), 80 ms (cost 8), 200 ms (cost 10) and 200 ms (cost 8): the
// cache on and off tell the same numbers (it used to repeat the 80 ms
// denial's, 200 ms too early).
func TestDenyCacheReproOfTheIssue(t *testing.T) {
	run := func(cache int) []ratelimit.Decision {
		clock := newManualClock()
		l := newTestRedis(t, ratelimit.WithClock(clock), WithDenyCache(cache))
		req := ratelimit.Request{Name: "repro", Key: "k", Limits: []ratelimit.Limit{{Algorithm: ratelimit.TokenBucket, Period: time.Second, Threshold: 10}}}
		var out []ratelimit.Decision
		for _, call := range []struct {
			at   time.Duration
			cost int64
		}{{0, 7}, {80 * time.Millisecond, 8}, {200 * time.Millisecond, 10}, {200 * time.Millisecond, 8}} {
			clock.Set(newManualClock().Now().Add(call.at))
			req.Cost = call.cost
			d := allow(t, l, req)
			d.Source = ratelimit.SourceBackend
			out = append(out, d)
		}
		return out
	}
	on, off := run(DefaultDenyCache), run(0)
	assert.Equal(t, off, on)
	assert.Equal(t, ratelimit.Decision{Remaining: 5, RetryAfter: 500 * time.Millisecond, ResetAfter: 500 * time.Millisecond}, off[2], "5 of 10 left, 5 more in half a second")
}

// exhausted returns limiters (processes) that share c, each of which has
// a denial of a daily limit of 5 in its deny cache: the limit was used up
// and each was denied by Redis.
func exhausted(t *testing.T, c *Limiter, others ...*Limiter) ratelimit.Request {
	t.Helper()
	req := ratelimit.Request{Name: "daily", Key: "k", Limits: []ratelimit.Limit{{Period: 24 * time.Hour, Threshold: 5}}}
	for range 5 {
		require.True(t, allow(t, c, req).Allowed)
	}
	for _, l := range append([]*Limiter{c}, others...) {
		d := allow(t, l, req)
		require.False(t, d.Allowed)
		require.Equal(t, ratelimit.SourceBackend, d.Source)
	}
	return req
}

// requireAdmittedAfterTheHold waits out the deny hold, from after state
// was lost, and requires every limiter to admit req again: no remembered
// denial outlives the hold.
func requireAdmittedAfterTheHold(t *testing.T, lost time.Time, req ratelimit.Request, limiters ...*Limiter) {
	t.Helper()
	time.Sleep(time.Until(lost.Add(DefaultDenyHold)))
	for i, l := range limiters {
		d, err := l.Allow(context.Background(), req)
		require.NoError(t, err)
		require.True(t, d.Allowed, "process %d after the hold: %+v", i, d)
	}
}

// TestDenyCacheSeesLostState: after an exhausted daily key's state is lost
// out of band (FLUSHALL, a key deleted by hand, a Reset from another
// process, a restart without persistence), every process admits it again
// once the deny hold (a second) has passed. The processes keep no ledger
// (WithFallbackProcesses stops the heartbeat, which finds a FLUSHALL or a
// restart and charges Redis again what they had admitted: see
// TestLedgerRefillsALineAfterFlushAll), so the deny cache alone is seen.
func TestDenyCacheSeesLostState(t *testing.T) {
	ctx := context.Background()
	newProcesses := func(t *testing.T) []*Limiter {
		c := rdb(t)
		srv.Flush(t)
		return []*Limiter{New(c, WithFallbackProcesses(3)), New(c, WithFallbackProcesses(3)), New(c, WithFallbackProcesses(3))}
	}
	t.Run("FLUSHALL", func(t *testing.T) {
		ls := newProcesses(t)
		req := exhausted(t, ls[0], ls[1:]...)
		remembered := time.Now()
		require.NoError(t, rdb(t).FlushAll(ctx).Err())
		lost := time.Now()
		if d := allow(t, ls[1], req); time.Since(remembered) < DefaultDenyHold/2 {
			require.Equal(t, ratelimit.SourceCache, d.Source, "within the hold the denial is repeated")
		}
		requireAdmittedAfterTheHold(t, lost, req, ls...)
	})
	t.Run("DEL", func(t *testing.T) {
		ls := newProcesses(t)
		req := exhausted(t, ls[0], ls[1:]...)
		require.NoError(t, rdb(t).Del(ctx, ls[0].Key(req.Name, req.Key, 0, ratelimit.SlidingLog)).Err())
		requireAdmittedAfterTheHold(t, time.Now(), req, ls...)
	})
	t.Run("Reset", func(t *testing.T) {
		ls := newProcesses(t)
		req := exhausted(t, ls[0], ls[1:]...)
		require.NoError(t, ls[0].Reset(ctx, req.Name, req.Key))
		lost := time.Now()
		assert.True(t, allow(t, ls[0], req).Allowed, "the process that reset forgets at once")
		requireAdmittedAfterTheHold(t, lost, req, ls[1:]...)
	})
	t.Run("restart", func(t *testing.T) {
		s, err := redistest.Start()
		require.NoError(t, err)
		t.Cleanup(func() { s.Stop() })
		c := s.Client()
		t.Cleanup(func() { c.Close() })
		ls := []*Limiter{New(c, WithBreaker(0, 0, 0), WithFallbackProcesses(2)), New(c, WithBreaker(0, 0, 0), WithFallbackProcesses(2))}
		req := exhausted(t, ls[0], ls[1:]...)
		s.Stop()
		s, err = redistest.StartOn(s.Addr)
		require.NoError(t, err)
		lost := time.Now()
		requireAdmittedAfterTheHold(t, lost, req, ls...)
	})
}
