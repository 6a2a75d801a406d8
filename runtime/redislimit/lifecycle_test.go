package redislimit

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
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
	require.Same(t, a.fallback.Fleet(), b.fallback.Fleet(), "one heartbeat per client and prefix")
	awaitBeats(t, a.fallback.Fleet(), 2)
	assert.Equal(t, 1, a.fallback.Processes(), "two limiters on one client are one process")
	assert.Equal(t, 1, b.fallback.Processes())

	other := New(failFastClient(t, s.Addr))
	awaitCount(t, a, 2)
	require.NoError(t, other.Close())
	awaitCount(t, a, 1)
	n, err := adminClient(t, s.Addr).ZCard(t.Context(), fleetKey(a.prefix)).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "a closed process's member is removed")

	// A prefix of its own is a heartbeat of its own.
	c := New(shared, WithPrefix("other:"))
	defer c.Close()
	assert.NotSame(t, a.fallback.Fleet(), c.fallback.Fleet())
}

// TestCloseStopsBackgroundWork: Close ends the heartbeat (once its last
// limiter is closed) and an open breaker's probe, without closing the
// client, and leaves no goroutine behind.
func TestCloseStopsBackgroundWork(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	client := failFastClient(t, s.Addr)
	before := runtime.NumGoroutine()

	a, b := New(client), New(client)
	awaitBeats(t, a.fallback.Fleet(), 1)
	require.NoError(t, a.Close())
	beats := b.fallback.Fleet().Beats()
	awaitBeats(t, b.fallback.Fleet(), beats+1) // the heartbeat goes on for b

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
	beats = b.fallback.Fleet().Beats()
	time.Sleep(2 * guard.HeartbeatEvery)
	assert.Equal(t, beats, b.fallback.Fleet().Beats(), "no heartbeat after the last Close")
}

// awaitBeats waits until f has beaten n times.
func awaitBeats(t *testing.T, f *guard.Fleet, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.Beats() < n {
		require.True(t, time.Now().Before(deadline), "the heartbeat beat %d times, not %d", f.Beats(), n)
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitCount waits until l counts n processes.
func awaitCount(t *testing.T, l *Limiter, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.fallback.Processes() != n {
		require.True(t, time.Now().Before(deadline), "the heartbeat counted %d processes, not %d", l.fallback.Processes(), n)
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
// starts the carry-back: the fallback spends only what Redis said was left,
// so the window that spans the outage admits the limit plus what Redis
// admitted without the fallback's charges (the calls it decided before
// they arrived), and nothing once they have.
func TestCarryBackWithoutBreaker(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			s, err := redistest.Start()
			require.NoError(t, err)
			t.Cleanup(s.Stop)
			l := New(failFastClient(t, s.Addr), WithBreaker(0, 0, 0), WithFallbackProcesses(1))
			defer l.Close()
			require.Nil(t, l.breakers)
			down, up := stall(adminClient(t, s.Addr))
			const limit, before = 10, 2
			rule := &ratelimit.Rule{Name: "nobreaker", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit, Algorithm: alg}}, OnError: ratelimit.FailLocal}
			ctx := t.Context()
			for range before {
				require.NoError(t, rule.Check(ctx, l, 1, "k"), "Redis admits before the outage")
			}
			down(t)
			byFallback := 0
			for range limit + 2 {
				a, err := rule.Admit(ctx, l, 1, "k")
				if err == nil {
					require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
					byFallback++
				}
			}
			require.Equal(t, limit-before, byFallback, "the fallback admits what Redis said was left")
			up(t)
			// Calls until the charges have arrived: Redis decides them
			// meanwhile, without them.
			byRedisBefore := 0
			deadline := time.Now().Add(30 * time.Second)
			for charged(l)+dropped(l) < limit-before || l.fallback.Carrying() {
				require.True(t, time.Now().Before(deadline), "the carry-back never arrived: %d charged, %d dropped, %d held", charged(l), dropped(l), l.fallback.Held())
				a, err := rule.Admit(ctx, l, 1, "k")
				if err == nil && a.Decision.Source == ratelimit.SourceBackend {
					byRedisBefore++
				}
				time.Sleep(5 * time.Millisecond)
			}
			after := 0
			for range limit {
				a, err := rule.Admit(ctx, l, 1, "k")
				if err == nil {
					after++
					t.Logf("admitted after the carry-back by %s", a.Decision.Source)
				}
			}
			total := before + byFallback + byRedisBefore + after
			t.Logf("%s: %d admitted, limit %d: %d by Redis before the outage, %d by the fallback, %d by Redis before the charges arrived, %d after; %d units charged, %d dropped",
				alg, total, limit, before, byFallback, byRedisBefore, after, charged(l), dropped(l))
			assert.Zero(t, after, "nothing once the charges have arrived")
			assert.LessOrEqual(t, total, limit+byRedisBefore, "the stated bound")
			assert.Positive(t, charged(l), "the fallback's admissions were carried back")
		})
	}
}
