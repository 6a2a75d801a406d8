package redislimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestCarryBackSlidingWindowPrevious: what the fallback admitted in a
// sliding window's window that has ended when Redis is back still weighs
// on the window after it, and is carried back there: Redis then decides
// exactly as the twin that saw every call, on a fake clock. With a
// breaker, the probe carries back before any call moves the key's state
// to the new window; without one, the call that finds Redis back moves it
// first.
func TestCarryBackSlidingWindowPrevious(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breaker Option
	}{
		{"breaker", WithBreaker(1, 20*time.Millisecond, 20*time.Millisecond)},
		{"no breaker", WithBreaker(0, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redistest.Start()
			require.NoError(t, err)
			t.Cleanup(s.Stop)
			const period = time.Minute
			clock := clocktest.NewManual()
			w := time.Now().Truncate(period)
			clock.Set(w.Add(period / 2))
			l := New(failFastClient(t, s.Addr), ratelimit.WithClock(clock), tc.breaker, WithFallbackProcesses(1), WithDenyCache(0))
			defer l.Close()
			twin := ratelimit.NewMemory(ratelimit.WithClock(clock))
			down, up := stall(adminClient(t, s.Addr))
			const limit = 10
			rule := &ratelimit.Rule{Name: "prev", Limits: []ratelimit.Limit{{Period: period, Threshold: limit, Algorithm: ratelimit.SlidingWindow}}, OnError: ratelimit.FailLocal}
			ctx := t.Context()
			both := func() (redis, memory bool) {
				a, err := rule.Admit(ctx, l, 1, "k")
				_, terr := rule.Admit(ctx, twin, 1, "k")
				return err == nil && a.Decided, terr == nil
			}
			for range 3 {
				r, m := both()
				require.True(t, r && m, "Redis admits before the outage")
			}
			down(t)
			clock.Set(w.Add(period * 8 / 10))
			for range 5 {
				a, err := rule.Admit(ctx, l, 1, "k")
				require.NoError(t, err)
				require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
				_, err = rule.Admit(ctx, twin, 1, "k")
				require.NoError(t, err)
			}
			clock.Set(w.Add(period + period*3/10))
			up(t)
			deadline := time.Now().Add(30 * time.Second)
			if l.breakers == nil {
				r, m := both() // Redis decides, without the charges; starts the carry-back
				require.True(t, r && m)
			}
			for charged(l)+dropped(l) < 5 || l.CircuitOpen() {
				require.True(t, time.Now().Before(deadline), "the carry-back never arrived: %d charged, %d dropped", charged(l), dropped(l))
				time.Sleep(10 * time.Millisecond)
			}
			assert.EqualValues(t, 5, charged(l), "the ended window's admissions are charged")
			// prev 8 weighs ceil(8 × 0.7) = 6: Redis and the twin admit
			// alike from here.
			for i := range 2 * limit {
				r, m := both()
				require.Equal(t, m, r, "call %d after the carry-back: Redis and the twin differ", i)
			}
		})
	}
}

// TestCarryBackSlidingWindowPreviousServerClock: on the server's clock
// (no WithClock), where the decide script moves a key's state to the next
// window by a relative TTL, the carry-back still finds the window the
// state is in, and charges the ended window's admissions to the previous
// count.
func TestCarryBackSlidingWindowPreviousServerClock(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	const period = 3 * time.Second
	l := New(failFastClient(t, s.Addr), WithBreaker(0, 0, 0), WithFallbackProcesses(1), WithDenyCache(0))
	defer l.Close()
	down, up := stall(adminClient(t, s.Addr))
	rule := &ratelimit.Rule{Name: "prevserver", Limits: []ratelimit.Limit{{Period: period, Threshold: 100, Algorithm: ratelimit.SlidingWindow}}, OnError: ratelimit.FailLocal}
	ctx := t.Context()
	// Start early in a window, so the outage ends in it.
	if left := period - time.Duration(time.Now().UnixNano())%period; left < 2*time.Second {
		time.Sleep(left + 10*time.Millisecond)
	}
	w := time.Now().Truncate(period)
	for range 2 {
		require.NoError(t, rule.Check(ctx, l, 1, "k"))
	}
	down(t)
	for range 3 {
		a, err := rule.Admit(ctx, l, 1, "k")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
	}
	if !time.Now().Before(w.Add(period)) {
		t.Skip("the outage's admissions ran past the window they were to fall in: too slow a machine to check")
	}
	time.Sleep(time.Until(w.Add(period + 10*time.Millisecond)))
	up(t)
	a, err := rule.Admit(ctx, l, 1, "k")
	require.NoError(t, err)
	require.Equal(t, ratelimit.SourceBackend, a.Decision.Source, "Redis decides, and moves the key to the new window")
	deadline := time.Now().Add(30 * time.Second)
	for charged(l)+dropped(l) < 3 {
		require.True(t, time.Now().Before(deadline), "the carry-back never arrived")
		time.Sleep(5 * time.Millisecond)
	}
	if time.Now().After(w.Add(2 * period)) {
		t.Skip("the carry-back came after the window it weighs on: too slow a machine to check")
	}
	assert.EqualValues(t, 3, charged(l), "charged to the previous count")
	packed, err := adminClient(t, s.Addr).Get(ctx, l.Key("prevserver", "k", 0, ratelimit.SlidingWindow)).Int64()
	require.NoError(t, err)
	assert.EqualValues(t, 2+3, packed/prevScale, "the previous window's count: Redis's 2 and the fallback's 3")
	assert.EqualValues(t, 1, packed%prevScale, "this window's: the call that found Redis back")
}
