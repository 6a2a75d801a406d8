package guard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// TestLeasesServeAHotLine: sequential calls of a leased line are admitted
// from leases, up to the limit and no more, and the backend's hook is
// told of each with Source SourceLease.
func TestLeasesServeAHotLine(t *testing.T) {
	metrics := &limitmetrics.Metrics{}
	g := guard.NewLeases(ratelimit.NewMemory(ratelimit.WithHook(metrics)))
	defer g.Close()
	req := ratelimit.Request{Name: "hot", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 500, Prefetch: time.Minute}}}
	admitted := 0
	for range 1000 {
		d, err := g.Allow(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	leases, served := g.Stats()
	if admitted != 500 {
		t.Errorf("admitted %d calls of a limit of 500", admitted)
	}
	if leases == 0 || served < 400 {
		t.Errorf("%d leases served %d calls", leases, served)
	}
	if got := metrics.SnapshotSource(ratelimit.SourceLease)["hot"].Allowed; got != uint64(served) {
		t.Errorf("the hook was told of %d admissions from leases, not %d", got, served)
	}
	t.Logf("%d leases served %d calls", leases, served)
}

// leasedLimit is a limit of alg of threshold a second, leased by 100ms.
func leasedLimit(alg ratelimit.Algorithm, threshold int64) ratelimit.Limit {
	return ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: threshold, Prefetch: 100 * time.Millisecond}
}

// TestLeasesDecideAsTheLimitAlone: one process's calls of a leased window
// limit, on a clock that moves, get the decisions the limit alone gives
// them: its own unused units go back before a call it cannot serve is
// decided.
func TestLeasesDecideAsTheLimitAlone(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		for _, cost := range []int64{1, 3} {
			clock, alone := clocktest.NewManual(), clocktest.NewManual()
			g := guard.NewLeases(ratelimit.NewMemory(ratelimit.WithClock(clock)))
			m := ratelimit.NewMemory(ratelimit.WithClock(alone))
			req := ratelimit.Request{Name: "hot", Cost: cost, Limits: []ratelimit.Limit{leasedLimit(alg, 100)}}
			rnd := rand.New(rand.NewPCG(1, uint64(cost)))
			for i := range 3000 {
				step := time.Duration(rnd.Int64N(int64(2 * time.Millisecond)))
				clock.Advance(step)
				alone.Advance(step)
				got, err := g.Allow(context.Background(), req)
				require.NoError(t, err)
				want, err := m.Allow(context.Background(), req)
				require.NoError(t, err)
				require.Equal(t, want.Allowed, got.Allowed, "%s cost %d, call %d", alg, cost, i)
			}
			_, served := g.Stats()
			require.Positive(t, served, "%s: calls admitted from leases", alg)
		}
	}
}

// TestLeasesAllOrNothing: a call that its exact line per user denies
// takes nothing from the lease of the line of every call as one.
func TestLeasesAllOrNothing(t *testing.T) {
	clock := clocktest.NewManual()
	m := ratelimit.NewMemory(ratelimit.WithClock(clock))
	g := guard.NewLeases(m)
	limits := []ratelimit.Limit{leasedLimit(ratelimit.FixedWindow, 1000), {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 2}}
	call := func(user string) bool {
		d, err := g.Allow(context.Background(), ratelimit.Request{Name: "hot", Keys: []string{"", user}, Limits: limits})
		require.NoError(t, err)
		return d.Allowed
	}
	require.True(t, call("ann"))
	held := g.Held("hot", "")
	require.Positive(t, held)
	require.True(t, call("ann"))
	require.Equal(t, held-1, g.Held("hot", ""))
	for range 5 {
		require.False(t, call("ann"), "ann's line holds 2")
	}
	require.Equal(t, held-1, g.Held("hot", ""), "a denied call takes nothing from the lease")
	g.Close()
	d, err := ratelimit.Peek(context.Background(), m, ratelimit.Request{Name: "hot", Limits: limits[:1]})
	require.NoError(t, err)
	require.Equal(t, int64(1000-2), d.Remaining, "the lease gave back what no call used")
}

// TestLeasesEndWhenAnOverrideChangesTheLimit: an override of the leased
// line ends its lease, which gives back what it did not use.
func TestLeasesEndWhenAnOverrideChangesTheLimit(t *testing.T) {
	clock := clocktest.NewManual()
	overrides := &ratelimit.StaticOverrides{}
	m := ratelimit.NewMemory(ratelimit.WithClock(clock), ratelimit.WithOverrides(overrides))
	g := guard.NewLeases(m)
	r := &ratelimit.Rule{Name: "hot", Limits: []ratelimit.Limit{leasedLimit(ratelimit.FixedWindow, 1000)}}
	for range 3 {
		require.NoError(t, r.Check(context.Background(), g, 1, ""))
	}
	require.Positive(t, g.Held("hot", ""))
	overrides.SetRule("hot", ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 5})
	require.NoError(t, r.Check(context.Background(), g, 1, ""))
	require.Zero(t, g.Held("hot", ""), "the override ended the lease")
	d, err := ratelimit.Peek(context.Background(), m, ratelimit.Request{Name: "hot", Limits: r.Limits})
	require.NoError(t, err)
	// The override's fixed window counts in the line's state too: 4 calls.
	require.Equal(t, int64(1000-4), d.Remaining, "the lease gave back what no call used")
}

// TestLeasesResetEndsThem: Reset ends the leases of its name and key.
func TestLeasesResetEndsThem(t *testing.T) {
	g := guard.NewLeases(ratelimit.NewMemory(ratelimit.WithClock(clocktest.NewManual())))
	req := ratelimit.Request{Name: "hot", Key: "k", Limits: []ratelimit.Limit{leasedLimit(ratelimit.GCRA, 1000)}}
	for range 3 {
		allow(t, g, req)
	}
	require.Positive(t, g.Held("hot", "k"))
	require.NoError(t, g.Reset(context.Background(), "hot", "k"))
	require.Zero(t, g.Held("hot", "k"))
}

// TestLeasesEndOnAnOutage: once the backend fails a call of the line, its
// lease has ended and the call fails with the backend's error; its units
// stay charged.
func TestLeasesEndOnAnOutage(t *testing.T) {
	f := &flaky{MemoryLimiter: ratelimit.NewMemory(ratelimit.WithClock(clocktest.NewManual()))}
	g := guard.NewLeases(f)
	limits := []ratelimit.Limit{leasedLimit(ratelimit.FixedWindow, 1000), {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 100}}
	req := ratelimit.Request{Name: "hot", Keys: []string{"", "ann"}, Limits: limits}
	allow(t, g, req)
	require.Positive(t, g.Held("hot", ""))
	f.down.Store(true)
	_, err := g.Allow(context.Background(), req)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	require.Zero(t, g.Held("hot", ""), "the outage ended the lease")
}

// TestLeasesWithWaitAndShadow: a rule whose leased line denies waits for
// it as without leases (each call admitted, over at least three windows of
// 5), and a shadow rule's calls all go ahead while its hook is told
// of what the limit would deny.
func TestLeasesWithWaitAndShadow(t *testing.T) {
	ctx := context.Background()
	g := guard.NewLeases(ratelimit.NewMemory())
	waits := &ratelimit.Rule{Name: "waits", Wait: time.Second, Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: 100 * time.Millisecond, Threshold: 5, Prefetch: 50 * time.Millisecond}}}
	windows := map[int64]bool{}
	for range 12 {
		require.NoError(t, waits.Check(ctx, g, 1, ""))
		now := time.Now().UnixMicro() / 100_000
		windows[now] = true
	}
	require.GreaterOrEqual(t, len(windows), 3, "the calls waited for later windows: 5 a window")

	metrics := &limitmetrics.Metrics{}
	gs := guard.NewLeases(ratelimit.NewMemory(ratelimit.WithHook(metrics)))
	shadow := &ratelimit.Rule{Name: "shadow", Shadow: true, Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 5, Prefetch: time.Minute}}}
	for range 10 {
		require.NoError(t, shadow.Check(ctx, gs, 1, ""))
	}
	c := metrics.Snapshot()["shadow"]
	require.Equal(t, uint64(5), c.ShadowLimited, "the limit would deny 5 of 10")
}

// TestLeasesBesideTheFallback: in an outage, the lease of a FailLocal
// rule ends once the backend fails it (its units stay charged there), the
// fallback decides the calls, and once the backend is back it holds both
// the lease's charge and the fallback's: the window is full.
func TestLeasesBesideTheFallback(t *testing.T) {
	ctx := context.Background()
	hook := &sources{}
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory(ratelimit.WithHook(hook))}
	l := guard.Wrap(backend, guard.WithBreaker(2, 10*time.Millisecond, 10*time.Millisecond), guard.WithFallbackProcesses(1))
	defer guard.Close(l)
	leases, ok := guard.Of[*guard.Leases](l)
	require.True(t, ok)
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	rule := &ratelimit.Rule{Name: "local", OnError: ratelimit.FailLocal, Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 100, Prefetch: time.Minute}}}
	for range 20 {
		require.NoError(t, rule.Check(ctx, l, 1, ""))
	}
	require.Positive(t, leases.Held("local", ""))

	backend.down.Store(true)
	for range 300 {
		_ = rule.Check(ctx, l, 1, "")
	}
	require.Zero(t, leases.Held("local", ""), "the outage ended the lease")
	require.Positive(t, hook.count(ratelimit.SourceFallback), "the fallback decided")

	backend.down.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "the probe closes the breaker")
	d, err := backend.MemoryLimiter.Allow(ctx, ratelimit.Request{Name: "local", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 100}}})
	require.NoError(t, err)
	require.False(t, d.Allowed, "the backend holds the lease's and the fallback's charges")
}

// TestLeasesBesideTheDenyCache: once the leased limit is full, the calls
// no lease can serve are decided exactly, and the deny cache answers
// their repeated denials: the backend is asked a few times, not per call.
func TestLeasesBesideTheDenyCache(t *testing.T) {
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory()}
	l := guard.Wrap(backend, guard.WithFallbackProcesses(1))
	defer guard.Close(l)
	req := ratelimit.Request{Name: "full", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 50, Prefetch: time.Minute}}}
	admitted := 0
	for range 1000 {
		if allow(t, l, req).Allowed {
			admitted++
		}
	}
	require.Equal(t, 50, admitted)
	require.Less(t, backend.asked.Load(), int64(40), "the backend decided leases and a few denials, no more")
}

// TestLeasesForgetIdleLines: the guard forgets a line once its lease
// ended at its deadline with no call to renew it, so keys that come and
// go leave nothing behind.
func TestLeasesForgetIdleLines(t *testing.T) {
	g := guard.NewLeases(ratelimit.NewMemory())
	defer g.Close()
	for k := range 50 {
		req := ratelimit.Request{Name: "idle", Key: fmt.Sprint("k", k), Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 100, Prefetch: 5 * time.Millisecond}}}
		for range 3 {
			allow(t, g, req)
		}
	}
	require.Eventually(t, func() bool { return g.Lines() == 0 }, time.Minute, time.Millisecond, "the lines left once their leases ended")
}

// TestLeasesRefuseTheStandInKey: a leased call whose first key begins
// with the key of the guard's stand-in lines fails as invalid.
func TestLeasesRefuseTheStandInKey(t *testing.T) {
	g := guard.NewLeases(ratelimit.NewMemory())
	_, err := g.Allow(context.Background(), ratelimit.Request{Name: "hot", Key: "\x00lease stand-in bob", Limits: []ratelimit.Limit{leasedLimit(ratelimit.FixedWindow, 10)}})
	require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
}

// TestLeasesLeaseASecondLine: a rule whose second line is leased, after
// an exact line per user, admits from the lease under the second line's
// own key and index: the lease's charge is in that line's state (a Peek
// of it in the backend counts it), a call the first line denies takes
// nothing from the lease, and the lease gives back what no call used.
func TestLeasesLeaseASecondLine(t *testing.T) {
	m := ratelimit.NewMemory(ratelimit.WithClock(clocktest.NewManual()))
	g := guard.NewLeases(m)
	limits := []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 2}, leasedLimit(ratelimit.FixedWindow, 1000)}
	call := func(user string) ratelimit.Decision {
		return allow(t, g, ratelimit.Request{Name: "hot", Keys: []string{user, ""}, Limits: limits})
	}
	require.True(t, call("ann").Allowed)
	held := g.Held("hot", "")
	require.Positive(t, held)
	line := ratelimit.Request{Name: "hot", Keys: []string{"nobody", ""}, Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 5000}, {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 1000}}}
	d, err := ratelimit.Peek(context.Background(), m, line)
	require.NoError(t, err)
	require.Equal(t, 1000-held-1, d.Remaining, "the backend holds the lease and the call in line 1's state")
	require.True(t, call("ann").Allowed)
	for range 5 {
		d := call("ann")
		require.False(t, d.Allowed, "ann's line holds 2")
		require.Zero(t, d.LimitIndex)
	}
	require.Equal(t, held-1, g.Held("hot", ""), "a denied call takes nothing from the lease")
	g.Close()
	d, err = ratelimit.Peek(context.Background(), m, line)
	require.NoError(t, err)
	require.Equal(t, int64(1000-2), d.Remaining, "the lease gave back what no call used")
}

// TestLeasesPeekThroughWrap: the limiter Wrap returns answers Peek through
// its lease guard: once a call took a lease, a Peek of the next is
// answered from it (the units it holds, source lease), which the backend's
// own Peek counts as used; the next call gets what the Peek told.
func TestLeasesPeekThroughWrap(t *testing.T) {
	ctx := context.Background()
	m := ratelimit.NewMemory()
	l := guard.Wrap(m, guard.WithFallbackProcesses(1))
	defer guard.Close(l)
	r := &ratelimit.Rule{Name: "hot", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1000, Prefetch: time.Minute}}}
	require.NoError(t, r.Check(ctx, l, 1, ""))
	leases, ok := guard.Of[*guard.Leases](l)
	require.True(t, ok)
	held := leases.Held("hot", "")
	require.Positive(t, held)
	d, err := r.Peek(ctx, l, "")
	require.NoError(t, err)
	require.Equal(t, ratelimit.Decision{Allowed: true, Remaining: held, Source: ratelimit.SourceLease}, d)
	backend, err := r.Peek(ctx, m, "")
	require.NoError(t, err)
	require.Equal(t, 1000-held-1, backend.Remaining, "the backend counts the lease as used")
	got, err := l.Allow(ctx, ratelimit.Request{Name: "hot", Limits: r.Limits})
	require.NoError(t, err)
	require.Equal(t, ratelimit.Decision{Allowed: true, Remaining: held - 1, Source: ratelimit.SourceLease}, got)
}

// TestLeasesOfASlidingLogLastAQuarterPeriod: a sliding log's lease admits
// calls for a quarter of the period at most, whatever its Prefetch, even
// when nothing ended it (no timer on a WithClock clock): the next call
// takes a new lease, and the first gave back what it did not use.
// (The memory limiter holds charges (OpReserveHeld): a lease's held charge keeps 2
// units or none, so the second lease's one call keeps 2.)
func TestLeasesOfASlidingLogLastAQuarterPeriod(t *testing.T) {
	clock := clocktest.NewManual()
	m := ratelimit.NewMemory(ratelimit.WithClock(clock))
	g := guard.NewLeases(m)
	defer g.Close()
	req := ratelimit.Request{Name: "log", Limits: []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Period: time.Second, Threshold: 1000, Prefetch: time.Minute}}}
	require.Equal(t, ratelimit.SourceLease, allow(t, g, req).Source)
	clock.Advance(time.Second/4 - time.Microsecond)
	require.Equal(t, ratelimit.SourceLease, allow(t, g, req).Source)
	leases, _ := g.Stats()
	require.EqualValues(t, 1, leases)
	clock.Advance(time.Microsecond)
	allow(t, g, req)
	leases, _ = g.Stats()
	require.EqualValues(t, 2, leases, "a quarter period after it was taken, the lease admits nothing")
	g.Close()
	d, err := ratelimit.Peek(context.Background(), m, ratelimit.Request{Name: "log", Limits: []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Period: time.Second, Threshold: 1000}}})
	require.NoError(t, err)
	require.EqualValues(t, 1000-2-1, d.Remaining, "the two leases' three calls, logged again at their ends; the rest given back")
}
