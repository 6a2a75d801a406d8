package redislimit

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestLimitersOnOneClientAreOneProcess: two limiters on one client share
// one heartbeat and count as one process; a limiter on another client is
// another process; closing the only limiter of a client takes its process
// out of the count at once (its member is removed).
func TestLimitersOnOneClientAreOneProcess(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	shared := failFastClient(t, s.Addr)
	a, b := New(shared), New(shared)
	defer a.Close()
	defer b.Close()
	require.Same(t, a.fleet, b.fleet, "one heartbeat per client and prefix")
	admin := adminClient(t, s.Addr)
	awaitBeat(t, admin, a.fleet)
	awaitBeat(t, admin, a.fleet)
	assert.Equal(t, 1, a.processes(), "two limiters on one client are one process")
	assert.Equal(t, 1, b.processes())

	other := New(failFastClient(t, s.Addr))
	awaitCount(t, a, 2)
	require.NoError(t, other.Close())
	awaitCount(t, a, 1)
	n, err := admin.ZCard(t.Context(), a.fleet.key).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "a closed process's member is removed")

	// A prefix of its own is a heartbeat of its own.
	c := New(shared, WithPrefix("other:"))
	defer c.Close()
	assert.NotSame(t, a.fleet, c.fleet)
}

// TestCloseStopsBackgroundWork: Close ends the heartbeat (once its last
// limiter is closed) and an open breaker's probe, without closing the
// client, and leaves no goroutine behind.
func TestCloseStopsBackgroundWork(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	client := failFastClient(t, s.Addr)
	admin := adminClient(t, s.Addr)
	require.NoError(t, admin.Ping(t.Context()).Err())
	before := runtime.NumGoroutine()

	a, b := New(client), New(client)
	awaitBeat(t, admin, a.fleet)
	require.NoError(t, a.Close())
	awaitBeat(t, admin, b.fleet) // the heartbeat goes on for b

	// b's breaker opens on a dead node's errors, and probes.
	dead := New(failFastClient(t, stoppedAddr(t)), WithBreaker(1, time.Hour, time.Hour))
	for !dead.CircuitOpen() {
		_, _ = dead.Allow(t.Context(), deadRequest())
	}
	require.NoError(t, b.Close())
	require.NoError(t, dead.Close())
	require.NoError(t, b.Close(), "Close may be called again")

	require.NoError(t, client.Ping(t.Context()).Err(), "the client is the caller's: still open")
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > before+2 { // the dead client's pool may keep a reaper
		require.True(t, time.Now().Before(deadline), "goroutines left after Close: %d, before: %d\n%s", runtime.NumGoroutine(), before, stacks())
		time.Sleep(20 * time.Millisecond)
	}
	_, ok := beatScore(t, admin, b.fleet)
	require.False(t, ok, "the last Close removes the process's member")
	time.Sleep(2 * heartbeatEvery)
	_, ok = beatScore(t, admin, b.fleet)
	assert.False(t, ok, "no heartbeat after the last Close")
}

// awaitBeat waits for f's next heartbeat, as Redis sees it: its member
// appears, or its score (when it stops counting) moves on.
func awaitBeat(t *testing.T, admin *redis.Client, f *fleet) {
	t.Helper()
	before, _ := beatScore(t, admin, f)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if score, ok := beatScore(t, admin, f); ok && score > before {
			return
		}
		require.True(t, time.Now().Before(deadline), "no heartbeat of %s in 30s", f.id)
		time.Sleep(10 * time.Millisecond)
	}
}

// beatScore returns the score of f's member in Redis, and whether it has
// one.
func beatScore(t *testing.T, admin *redis.Client, f *fleet) (float64, bool) {
	t.Helper()
	score, err := admin.ZScore(t.Context(), f.key, f.id).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	require.NoError(t, err)
	return score, true
}

// awaitCount waits until l counts n processes.
func awaitCount(t *testing.T, l *Limiter, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.processes() != n {
		require.True(t, time.Now().Before(deadline), "the heartbeat counted %d processes, not %d", l.processes(), n)
		time.Sleep(20 * time.Millisecond)
	}
}

// deadRequest is a request for a limiter whose Redis is gone.
func deadRequest() ratelimit.Request {
	return ratelimit.Request{Name: "dead", Key: "k", Cost: 1, Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1}}}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestCarryBackWithoutBreaker: with breakers off, no probe finds Redis
// back, so the first call Redis decides after the fallback admitted calls
// starts the carry-back: the window that spans the outage admits the limit
// plus what Redis admitted without the fallback's charges (before the
// outage, and the calls it decided before the charges arrived), and
// nothing once they have.
func TestCarryBackWithoutBreaker(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			s, err := redistest.Start()
			require.NoError(t, err)
			t.Cleanup(s.Stop)
			l := New(failFastClient(t, s.Addr), WithBreaker(0, 0, 0), WithFallbackProcesses(1))
			defer l.Close()
			require.Nil(t, l.breaker)
			down, up := stall(adminClient(t, s.Addr))
			const limit, before = 10, 2
			rule := &ratelimit.Rule{Name: "nobreaker", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit, Algorithm: alg}}, OnError: ratelimit.FailLocal}
			ctx := t.Context()
			for range before {
				require.NoError(t, rule.Check(ctx, l, "k", 1), "Redis admits before the outage")
			}
			down(t)
			byFallback := 0
			for range limit + 2 {
				a, err := rule.Admit(ctx, l, "k", 1)
				if err == nil {
					require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
					byFallback++
				}
			}
			require.Equal(t, limit, byFallback, "the fallback admits the limit (it cannot know Redis's)")
			up(t)
			// Calls until the charges have arrived: Redis decides them
			// meanwhile, without them.
			byRedisBefore := 0
			deadline := time.Now().Add(30 * time.Second)
			for l.carry.charged.Load()+l.carry.dropped.Load() < limit || l.carry.scheduled.Load() {
				require.True(t, time.Now().Before(deadline), "the carry-back never arrived: %d charged, %d dropped, %d held", l.carry.charged.Load(), l.carry.dropped.Load(), l.carry.size())
				a, err := rule.Admit(ctx, l, "k", 1)
				if err == nil && a.Decision.Source == ratelimit.SourceBackend {
					byRedisBefore++
				}
				time.Sleep(5 * time.Millisecond)
			}
			after := 0
			for range limit {
				a, err := rule.Admit(ctx, l, "k", 1)
				if err == nil {
					after++
					t.Logf("admitted after the carry-back by %s", a.Decision.Source)
				}
			}
			total := before + byFallback + byRedisBefore + after
			t.Logf("%s: %d admitted, limit %d: %d by Redis before the outage, %d by the fallback, %d by Redis before the charges arrived, %d after; %d units charged, %d dropped",
				alg, total, limit, before, byFallback, byRedisBefore, after, l.carry.charged.Load(), l.carry.dropped.Load())
			assert.Zero(t, after, "nothing once the charges have arrived")
			assert.LessOrEqual(t, total, limit+before+byRedisBefore, "the stated bound")
			assert.Positive(t, l.carry.charged.Load(), "the fallback's admissions were carried back")
		})
	}
}
