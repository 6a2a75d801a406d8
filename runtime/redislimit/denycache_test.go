package redislimit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// requireCacheAgrees requires d, a decision of a Redis limiter with a deny
// cache, to be want, the twin's decision of the same call, in every field
// but Source; with slack > 0 (the server's clock, which the twin reads only
// to the millisecond), a repeated denial's RetryAfter and ResetAfter may
// differ from the twin's by up to slack.
func requireCacheAgrees(t *testing.T, want, d ratelimit.Decision, slack time.Duration, msgAndArgs ...any) {
	t.Helper()
	if d.Source != ratelimit.SourceCache {
		require.Equal(t, want, d, msgAndArgs...)
		return
	}
	d.Source = want.Source
	if slack > 0 {
		require.InDelta(t, want.RetryAfter, d.RetryAfter, float64(slack), msgAndArgs...)
		require.InDelta(t, want.ResetAfter, d.ResetAfter, float64(slack), msgAndArgs...)
		d.RetryAfter, d.ResetAfter = want.RetryAfter, want.ResetAfter
	}
	require.Equal(t, want, d, msgAndArgs...)
}

func newCachedRedis(t testing.TB, opts ...Option) *Limiter {
	return newTestRedis(t, append([]Option{WithDenyCache(DefaultDenyCache)}, opts...)...)
}

// TestDenyCacheAdmitsAtTheServersRetryTime: on the server's clock, a call
// made when the RetryAfter of a denial has passed since its answer came
// (so at or after the server's own retry time) is asked of Redis and
// admitted, for every algorithm.
func TestDenyCacheAdmitsAtTheServersRetryTime(t *testing.T) {
	ctx := context.Background()
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			l := newCachedRedis(t)
			req := ratelimit.Request{Name: "retry", Key: string(alg), Limits: []ratelimit.Limit{{Algorithm: alg, Period: 40 * time.Millisecond, Threshold: 2}}}
			for round := range 5 {
				var d ratelimit.Decision
				var answered time.Time
				for d.Allowed || answered.IsZero() {
					var err error
					d, err = l.Allow(ctx, req)
					require.NoError(t, err)
					answered = time.Now()
				}
				require.Equal(t, ratelimit.SourceBackend, d.Source, "round %d: the first denial is Redis's", round)
				time.Sleep(time.Until(answered.Add(d.RetryAfter)))
				d, err := l.Allow(ctx, req)
				require.NoError(t, err)
				require.Equal(t, ratelimit.SourceBackend, d.Source, "round %d", round)
				require.True(t, d.Allowed, "round %d: at the server's retry time", round)
			}
		})
	}
}

// TestDenyCacheOnTheServersClockAgreesWithTheTwin runs the windows, whose
// scripts on the server's clock tell times from the start of the server's
// millisecond, with the deny cache against the twin pinned to that
// millisecond (as TestWindowsOnTheServersClockAgreeWithTheTwin does
// without the cache): every denial the cache repeats is one the twin
// makes.
func TestDenyCacheOnTheServersClockAgreesWithTheTwin(t *testing.T) {
	ctx := context.Background()
	c := rdb(t)
	for _, lim := range []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Period: 3 * time.Millisecond, Threshold: 2},
		{Algorithm: ratelimit.FixedWindow, Period: 20 * time.Millisecond, Threshold: 5},
		{Algorithm: ratelimit.SlidingWindow, Period: 3 * time.Millisecond, Threshold: 2},
		{Algorithm: ratelimit.SlidingWindow, Period: 20 * time.Millisecond, Threshold: 5},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			red := newCachedRedis(t)
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			decided := map[ratelimit.Source]int{}
			run := 0
			// A repeat comes only from a call made before the denial's
			// retry time, a few ms in a sliding window: on a loaded
			// machine, a few in a hundred calls.
			deadline := time.Now().Add(4 * time.Minute)
			for compared := 0; decided[ratelimit.SourceCache] < 100 || decided[ratelimit.SourceBackend] < 200; {
				require.True(t, time.Now().Before(deadline), "decided: %v", decided)
				// Costs 1 and 2 in turn in a fixed window, whose denial
				// that leaves nothing the cache repeats for any cost; in a
				// sliding window, whose such denial it repeats for cost 1
				// only, every fourth call costs 2.
				cost := int64(compared%2 + 1)
				if lim.Algorithm == ratelimit.SlidingWindow {
					cost = int64(compared%4/3 + 1)
				}
				req := ratelimit.Request{Name: "server-clock", Key: fmt.Sprint(run), Cost: cost, Limits: []ratelimit.Limit{lim}}
				before := c.Time(ctx).Val()
				d, err := red.Allow(ctx, req)
				require.NoError(t, err)
				after := c.Time(ctx).Val()
				if before.UnixMilli() != after.UnixMilli() {
					run++ // the twin cannot know in which ms Redis decided
					continue
				}
				clock.Set(time.UnixMilli(before.UnixMilli()))
				requireCacheAgrees(t, allow(t, mem, req), d, time.Millisecond, "call %d of run %d at %s: %+v", compared, run, before.Format(time.StampMicro), req)
				decided[d.Source]++
				compared++
				if compared%4 == 0 {
					time.Sleep(time.Duration(compared%7) * lim.Period / 5)
				}
			}
		})
	}
}

// TestDenyCacheCost: a denial that leaves units is asked of Redis every
// time, with its own RetryAfter; a denial of a call of cost 1 that leaves
// none is repeated for calls of cost 1 only; a fixed window's denial that
// leaves none is repeated for any cost.
func TestDenyCacheCost(t *testing.T) {
	m := &limitmetrics.Metrics{}
	clock := newManualClock()
	l := newCachedRedis(t, ratelimit.WithHook(m), ratelimit.WithClock(clock))
	req := ratelimit.Request{Name: "cost", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 5}}, Cost: 3}
	assert.True(t, allow(t, l, req).Allowed)
	for _, cost := range []int64{3, 4, 5} {
		req.Cost = cost
		d := allow(t, l, req)
		assert.Equal(t, ratelimit.Decision{Remaining: 2, RetryAfter: time.Hour, ResetAfter: time.Hour}, d, "cost %d: Redis denies it, with 2 left", cost)
	}
	req.Cost = 2
	assert.Equal(t, ratelimit.Decision{Allowed: true, ResetAfter: time.Hour}, allow(t, l, req), "Redis admits the 2 left")
	req.Cost = 1
	clock.Advance(time.Minute)
	assert.Equal(t, ratelimit.Decision{RetryAfter: time.Hour - time.Minute, ResetAfter: time.Hour - time.Minute}, allow(t, l, req), "Redis denies: none left")
	clock.Advance(time.Second / 2) // within the deny hold, a second
	assert.Equal(t, ratelimit.Decision{RetryAfter: time.Hour - time.Minute - time.Second/2, ResetAfter: time.Hour - time.Minute - time.Second/2, Source: ratelimit.SourceCache}, allow(t, l, req), "repeated, as Redis would answer it")
	clock.Advance(time.Second / 2)
	assert.Equal(t, ratelimit.SourceBackend, allow(t, l, req).Source, "past the deny hold, Redis is asked again")
	req.Cost = 2
	assert.Equal(t, ratelimit.SourceBackend, allow(t, l, req).Source, "a costlier call's RetryAfter is Redis's to tell")

	fixed := ratelimit.Request{Name: "cost-fixed", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 5}}, Cost: 5}
	assert.True(t, allow(t, l, fixed).Allowed)
	assert.Equal(t, ratelimit.SourceBackend, allow(t, l, fixed).Source)
	for _, cost := range []int64{1, 3, 5} {
		fixed.Cost = cost
		assert.Equal(t, ratelimit.SourceCache, allow(t, l, fixed).Source, "a full fixed window denies any cost until it ends")
	}
	assert.Equal(t, limitmetrics.Counters{Allowed: 2, Limited: 7, Cached: 1, NearLimit: 1}, m.Snapshot()["cost"])
	assert.Equal(t, limitmetrics.Counters{Allowed: 1, Limited: 4, Cached: 3, NearLimit: 1}, m.Snapshot()["cost-fixed"])
}

// TestDenyCacheMultiLimitAndShadow: a denial by either limit of a call is
// repeated; a shadow rule's repeated would-be denials reach ShadowLimited
// and never deny.
func TestDenyCacheMultiLimitAndShadow(t *testing.T) {
	ctx := context.Background()
	m := &limitmetrics.Metrics{}
	l := newCachedRedis(t, ratelimit.WithHook(m))
	limits := []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, {Algorithm: ratelimit.GCRA, Period: time.Hour, Threshold: 3}}
	real := &ratelimit.Rule{Name: "multi", Limits: limits}
	shadow := &ratelimit.Rule{Name: "multi-shadow", Limits: limits, Shadow: true}
	for i := range 10 {
		err := real.Check(ctx, l, 1, "k")
		require.Equal(t, i >= 3, err != nil, "call %d: %v", i, err)
		if err != nil {
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, limits[1], le.Limit, "the GCRA limit denies")
		}
		require.NoError(t, shadow.Check(ctx, l, 1, "k"))
	}
	assert.Equal(t, limitmetrics.Counters{Allowed: 3, Limited: 7, Cached: 6, NearLimit: 1}, m.Snapshot()["multi"])
	assert.Equal(t, limitmetrics.Counters{Allowed: 3, ShadowLimited: 7, Cached: 6, NearLimit: 1}, m.Snapshot()["multi-shadow"])
}

// TestDenyCacheForgetsWhenOverridesChangeTheLimits: denials made under one
// set of a rule's limits are forgotten once a call has other limits, also
// when the limits change back.
func TestDenyCacheForgetsWhenOverridesChangeTheLimits(t *testing.T) {
	ctx := context.Background()
	var threshold atomic.Int64
	threshold.Store(1)
	ov := overridesFunc(func(context.Context, string) ([]ratelimit.Limit, bool) {
		return perPeriod(threshold.Load(), time.Hour), true
	})
	m := &limitmetrics.Metrics{}
	l := newCachedRedis(t, ratelimit.WithOverrides(ov), ratelimit.WithHook(m))
	rule := &ratelimit.Rule{Name: "ov", Limits: perPeriod(1, time.Hour)}
	require.NoError(t, rule.Check(ctx, l, 1, ""))
	require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited)
	require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited)
	require.Equal(t, uint64(1), m.Snapshot()["ov"].Cached)
	threshold.Store(2) // the override raises the threshold: one more fits
	require.NoError(t, rule.Check(ctx, l, 1, ""))
	require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited)
	require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited)
	require.Equal(t, uint64(2), m.Snapshot()["ov"].Cached)
	threshold.Store(1) // and back: the denial under 1 was made before
	require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited)
	assert.Equal(t, limitmetrics.Counters{Allowed: 2, Limited: 5, Cached: 2, NearLimit: 2}, m.Snapshot()["ov"], "Redis decided the call after the change back")
}

// TestWaitingCallsGoPastTheDenyCache: a call that may wait is decided by
// Redis in its turn (see AllowInTurn), never by the deny cache, which
// would hold it out of the queue until its retry, behind calls that began
// to wait after it; it is admitted once the limit admits it.
func TestWaitingCallsGoPastTheDenyCache(t *testing.T) {
	ctx := context.Background()
	m := &limitmetrics.Metrics{}
	l := newCachedRedis(t, ratelimit.WithHook(m))
	rule := &ratelimit.Rule{Name: "wait", Limits: perPeriod(1, 50*time.Millisecond)}
	waiting := &ratelimit.Rule{Name: "wait", Limits: rule.Limits, Wait: time.Minute}
	require.NoError(t, rule.Check(ctx, l, 1, ""))
	require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited) // the cache holds this denial
	_, cached := l.CachedDenial(ratelimit.Request{Name: "wait", Limits: rule.Limits})
	require.True(t, cached)
	require.NoError(t, waiting.Check(ctx, l, 1, ""))
	c := m.Snapshot()["wait"]
	assert.Equal(t, uint64(2), c.Allowed)
	assert.Zero(t, c.Cached, "the waiting call was answered by the cache")
	assert.Equal(t, uint64(2), c.Limited, "Redis denied the waiting call's first try, as the second call")
}

// abuseEnv makes the test binary an abusing process of testAbuse (see
// TestMain): "standalone ADDR" or "cluster ADDR,ADDR,...".
const abuseEnv = "RATELIMIT_TEST_ABUSE"

// The abuse: processes × goroutines, each making calls, on one key.
const abuseProcesses, abuseGoroutines, abuseCalls = 4, 64, 4000

var abuseLimit = ratelimit.Limit{Period: time.Hour, Threshold: 1000}

// abuse is the main of an abusing process: it makes its calls on the Redis
// spec names and prints how many were admitted, denied, and denied from
// the cache.
func abuse(spec string) int {
	mode, list, _ := strings.Cut(spec, " ")
	addrs := strings.Split(list, ",")
	var client redis.UniversalClient = redis.NewClient(&redis.Options{Addr: addrs[0], PoolSize: abuseGoroutines})
	if mode == "cluster" {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: abuseGoroutines})
	}
	defer client.Close()
	m := &limitmetrics.Metrics{}
	l := New(client, ratelimit.WithHook(m))
	req := ratelimit.Request{Name: "abuse", Key: "mallory", Limits: []ratelimit.Limit{abuseLimit}}
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range abuseGoroutines {
		wg.Go(func() {
			for range abuseCalls {
				if _, err := l.Allow(context.Background(), req); err != nil {
					failed.Add(1)
					fmt.Fprintln(os.Stderr, err)
				}
			}
		})
	}
	wg.Wait()
	c := m.Snapshot()["abuse"]
	fmt.Printf("abuse: %d %d %d %d\n", c.Allowed, c.Limited, c.Cached, failed.Load())
	return 0
}

// testAbuse runs abuseProcesses copies of the test binary abusing one key
// on the Redis servers (a standalone one, or a cluster's masters) at once,
// and requires that exactly the threshold was admitted, that at most one
// denied call in 100 reached Redis, and that the calls that did cost it a
// few commands each (INFO commandstats). How many denials reach Redis
// grows with the run's length (the cache asks again once per deny hold),
// which a loaded machine or the race detector stretches: it counts
// against the calls, not against the run's length.
func testAbuse(t *testing.T, mode string, servers []string) {
	ctx := context.Background()
	var clients []*redis.Client
	for _, addr := range servers {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.ConfigResetStat(ctx).Err())
		clients = append(clients, c)
	}
	var outs [abuseProcesses]bytes.Buffer
	var cmds []*exec.Cmd
	start := time.Now()
	for i := range abuseProcesses {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), abuseEnv+"="+mode+" "+strings.Join(servers, ","))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	var allowed, limited, cached uint64
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), outs[i].String())
		var a, l, c, failed uint64
		sc := bufio.NewScanner(&outs[i])
		found := false
		for sc.Scan() {
			if _, err := fmt.Sscanf(sc.Text(), "abuse: %d %d %d %d", &a, &l, &c, &failed); err == nil {
				found = true
			}
		}
		require.True(t, found, "process %d printed no counts", i)
		require.Zero(t, failed)
		allowed, limited, cached = allowed+a, limited+l, cached+c
	}
	commands := uint64(0)
	for _, c := range clients {
		commands += commandsRun(t, c)
	}
	t.Logf("%s: %d admitted, %d denied (%d from the cache); %d Redis commands, %.5f per denied call",
		mode, allowed, limited, cached, commands, float64(commands)/float64(limited))
	elapsed := time.Since(start)
	assert.Equal(t, uint64(abuseLimit.Threshold), allowed)
	assert.Equal(t, uint64(abuseProcesses*abuseGoroutines*abuseCalls), allowed+limited)
	assert.LessOrEqual(t, limited-cached, limited/100, "denied calls that reached Redis")
	// A decision is a script of a few commands; the heartbeat and a
	// cluster client's topology refreshes add a few a second per process.
	reached := allowed + limited - cached
	assert.LessOrEqual(t, float64(commands), float64(10*reached)+20*abuseProcesses*elapsed.Seconds(), "Redis commands for %d calls that reached it in %s", reached, elapsed)
}

// commandsRun returns how many commands the server ran since its stats
// were reset, less those of the test's own INFO and CONFIG. Those its
// scripts run count too: a decision is several.
func commandsRun(t testing.TB, c *redis.Client) uint64 {
	total := uint64(0)
	for name, n := range commandCalls(t, c) {
		if name != "info" && !strings.HasPrefix(name, "config") {
			total += uint64(n)
		}
	}
	return total
}

// TestDenyCacheAbuseFromProcesses: 4 processes × 64 goroutines on one key
// of a standalone Redis admit exactly the threshold, and their denials
// barely reach Redis.
func TestDenyCacheAbuseFromProcesses(t *testing.T) {
	srv.Flush(t)
	testAbuse(t, "standalone", []string{srv.Addr})
}

// TestDenyCacheAbuseOnACluster: the same on a three-master Redis Cluster.
func TestDenyCacheAbuseOnACluster(t *testing.T) {
	c, err := redistest.StartCluster(3)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	testAbuse(t, "cluster", c.Addrs())
}

// TestDenyCacheLargerCostOfSeveralLimits: a fixed window's denial of a
// call of several limits is not repeated for a larger cost, which another
// limit may deny with a longer RetryAfter (the denial Redis would tell).
func TestDenyCacheLargerCostOfSeveralLimits(t *testing.T) {
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	cac := newCachedRedis(t, ratelimit.WithClock(clock), WithDenyHold(time.Hour))
	limits := []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Period: time.Minute, Threshold: 3},
		{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 5},
	}
	for i, cost := range []int64{3, 1, 3, 2, 1} {
		req := ratelimit.Request{Name: "larger-cost", Key: "k", Cost: cost, Limits: limits}
		requireCacheAgrees(t, allow(t, mem, req), allow(t, cac, req), -1, "call %d of cost %d", i, cost)
	}
}
