package redislimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// fleetOf starts a server of its own and n limiters on it, each with a
// client of its own, as n processes would be, without WithFallbackProcesses,
// and waits until each counts n processes.
func fleetOf(t *testing.T, n int) (*redistest.Server, []*Limiter) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	ls := make([]*Limiter, n)
	for i := range ls {
		ls[i] = New(failFastClient(t, s.Addr), WithBreaker(2, 20*time.Millisecond, 200*time.Millisecond))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, l := range ls {
		for l.fallback.Processes() != n {
			require.True(t, time.Now().Before(deadline), "the heartbeat counted %d processes, not %d", l.fallback.Processes(), n)
			time.Sleep(20 * time.Millisecond)
		}
	}
	return s, ls
}

// check checks one call of rule on l and returns whether it was admitted,
// whether the fallback decided it (any denial's limit must be what that
// decider enforces: want when the fallback denied), failing the test
// unless it was decided.
func checkFleet(t *testing.T, rule *ratelimit.Rule, l *Limiter, key string, share int64) (admitted, local bool) {
	t.Helper()
	open := l.CircuitOpen()
	a, err := rule.Admit(context.Background(), l, 1, key)
	if err == nil {
		require.True(t, a.Decided, "call on %q was not decided", key)
		if a.Decision.Source == ratelimit.SourceFallback {
			assert.Equal(t, share, a.Limit.Threshold, "an admission by the fallback names the share it enforces")
		}
		return true, a.Decision.Source == ratelimit.SourceFallback
	}
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le, "a decided call fails only as denied")
	if le.Limit.Threshold == share && share != rule.Limits[0].Threshold {
		return false, true
	}
	require.Equal(t, rule.Limits[0].Threshold, le.Limit.Threshold, "a denial by Redis names the limit (breaker open before: %v)", open)
	return false, false
}

// awaitRedis makes calls of an unrelated rule on each limiter until Redis
// decides one, under a generous deadline; calls shed while the processes
// rejoin Redis (Source busy) are made again.
func awaitRedis(t *testing.T, ls []*Limiter) {
	rule := &ratelimit.Rule{Name: "await", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1 << 40}}, OnError: ratelimit.FailLocal}
	deadline := time.Now().Add(30 * time.Second)
	for i, l := range ls {
		for {
			a, err := rule.Admit(context.Background(), l, 1, fmt.Sprint("await", i))
			var le *ratelimit.LimitError
			if !errors.As(err, &le) || le.Source != ratelimit.SourceBusy {
				// Shed while the fleet rejoins; otherwise decided.
				require.NoError(t, err)
				if a.Decision.Source == ratelimit.SourceBackend {
					break
				}
			}
			require.True(t, time.Now().Before(deadline), "Redis never decided again after the outage")
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestFallbackSizesItself: three limiters sharing a Redis, without
// WithFallbackProcesses, count themselves; during an outage each enforces
// a third of the limit, and tells a denied caller so, so the fleet admits
// the limit, not three times it; once Redis is back, what the fallback
// admitted is charged there, so the window admits nothing more.
func TestFallbackSizesItself(t *testing.T) {
	s, ls := fleetOf(t, 3)
	admin := adminClient(t, s.Addr)
	down, up := stall(admin)
	const limit = 6
	rule := &ratelimit.Rule{Name: "fleet", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}

	down(t)
	byFallback := 0
	for _, l := range ls {
		for range 2 * limit {
			ok, local := checkFleet(t, rule, l, "k", limit/3)
			require.True(t, local, "the fallback decides during the outage")
			if ok {
				byFallback++
			}
		}
	}
	assert.Equal(t, limit, byFallback, "the fleet's fallbacks admit the limit during the outage, not 3×")

	up(t)
	awaitRedis(t, ls)
	byRedis := 0
	for _, l := range ls {
		for range limit {
			ok, local := checkFleet(t, rule, l, "k", limit/3)
			require.False(t, local)
			if ok {
				byRedis++
			}
		}
	}
	assert.Zero(t, byRedis, "Redis has the fallback's charges: the window is full")
	var carried int64
	for _, l := range ls {
		carried += charged(l)
	}
	assert.GreaterOrEqual(t, carried, int64(limit), "the fallback's admissions were charged to Redis")
	t.Logf("outage: %d admitted by the fallbacks of 3 processes, limit %d; after: %d by Redis", byFallback, limit, byRedis)
}

// TestWindowSpanningAnOutage has Redis admit a few calls, then drives calls
// from two goroutines per process of three, during and after an outage, on one key whose window
// (an hour) spans it all, and counts the admissions: the fallbacks spend
// their shares of what Redis said was left, so at most the limit plus the
// stragglers the documented bound allows (calls Redis answered late).
func TestWindowSpanningAnOutage(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			s, ls := fleetOf(t, 3)
			admin := adminClient(t, s.Addr)
			down, up := stall(admin)
			const limit, before = 30, 3
			lim := ratelimit.Limit{Period: time.Hour, Threshold: limit, Algorithm: alg}
			rule := &ratelimit.Rule{Name: "span", Limits: []ratelimit.Limit{lim}, OnError: ratelimit.FailLocal}
			ctx := context.Background()
			for i := range before {
				require.NoError(t, rule.Check(ctx, ls[i%3], 1, "w"), "Redis admits before the outage")
			}
			var admitted, byFallback, byRedisAfter atomic.Int64
			var recovered atomic.Bool
			down(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			// spent[i]: process i's fallback denied a call, so it spent
			// its share (a fallback's share does not come back within the
			// window: an hour).
			var spent [3]atomic.Bool
			for i, l := range ls {
				for range 2 {
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
							}
							a, err := rule.Admit(ctx, l, 1, "w")
							if err == nil {
								admitted.Add(1)
								if a.Decision.Source == ratelimit.SourceFallback {
									byFallback.Add(1)
								} else if recovered.Load() {
									byRedisAfter.Add(1)
								}
							} else if !errors.Is(err, ratelimit.ErrLimited) {
								t.Errorf("call failed: %v", err)
								return
							} else if le := (*ratelimit.LimitError)(nil); errors.As(err, &le) && le.Source == ratelimit.SourceFallback {
								spent[i].Store(true)
							}
							time.Sleep(time.Millisecond)
						}
					})
				}
			}
			// The outage lasts until the fallbacks have admitted their
			// shares: until each process's fallback denied a call, with
			// its breaker open, so that the calls in flight when the
			// outage began have failed (sampled under a generous
			// deadline). Their shares add up to at most limit-before, so
			// waiting for the fallbacks to admit the limit ran out the
			// deadline every time.
			over := func() bool {
				for i, l := range ls {
					if !spent[i].Load() || !l.CircuitOpen() {
						return false
					}
				}
				return true
			}
			deadline := time.Now().Add(30 * time.Second)
			for !over() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			up(t)
			awaitRedis(t, ls)
			recovered.Store(true)
			// Calls go on after the recovery: Redis decides them.
			var decidedAfter int
			for decidedAfter < 30 {
				ok, local := checkFleet(t, rule, ls[decidedAfter%3], "w", limit/3)
				if ok {
					admitted.Add(1)
				}
				if !local {
					decidedAfter++
				}
			}
			close(stop)
			wg.Wait()
			for i, l := range ls {
				t.Logf("process %d: %d units carried back, %d dropped, %d left", i, charged(l), dropped(l), l.fallback.Held())
			}
			total := admitted.Load() + before
			t.Logf("%s: %d admitted in the window of limit %d: %d by Redis before the outage, %d by the fallbacks, %d by Redis during and after",
				alg, total, limit, before, byFallback.Load(), total-before-byFallback.Load())
			// Each fallback spends its share of what Redis last told its
			// process was left (remaining / 3, rounded down).
			assert.LessOrEqual(t, byFallback.Load(), int64(limit-before), "the fallbacks admit at most what Redis said was left")
			assert.GreaterOrEqual(t, byFallback.Load(), int64(limit-before-len(ls)), "the fallbacks admit what Redis said was left, a share each")
			// Redis admitted before the outage, and calls in flight when it
			// began or ended that it answered late: the fallbacks did not
			// know of them. They bound the excess; after the recovery Redis
			// admits nothing: the window is full of the fallbacks' charges.
			unknown := total - byFallback.Load() - byRedisAfter.Load()
			t.Logf("unknown to the fallbacks: %d; by Redis once every process was back: %d", unknown, byRedisAfter.Load())
			assert.LessOrEqual(t, total, limit+min(unknown, limit), "at most the limit plus what the fallbacks could not know")
			assert.Zero(t, byRedisAfter.Load(), "nothing once every process is back")
		})
	}
}
