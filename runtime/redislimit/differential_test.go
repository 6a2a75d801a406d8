package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// agreeSet is a set of limits decided together, with the largest cost the
// differential test gives its calls. With skew, the clock also steps back
// by up to two periods; with others, the calls move through the limit sets
// in order, each set taking an equal run of calls, as when a release
// changes a limit's algorithm: the new algorithm starts afresh on both
// backends (in Redis under a key of its own).
type agreeSet struct {
	name    string
	limits  []ratelimit.Limit
	maxCost int64
	skew    bool
	others  [][]ratelimit.Limit
}

// step moves clock on (and, with skew, sometimes back) before call i of
// n, and returns the limits that call is decided against.
func (s agreeSet) step(rng *rand.Rand, clock *manualClock, i, n int) []ratelimit.Limit {
	clock.Advance(randomAdvance(rng))
	if s.skew && rng.IntN(5) == 0 {
		clock.Advance(-time.Duration(rng.Int64N(int64(2*s.limits[0].Period/us))) * us)
	}
	if s.others != nil {
		return s.others[i*len(s.others)/n]
	}
	return s.limits
}

// all returns every limit of the set.
func (s agreeSet) all() []ratelimit.Limit {
	all := s.limits
	for _, o := range s.others {
		all = append(all[:len(all):len(all)], o...)
	}
	return all
}

// request returns a call against limits with a random key and cost.
func (s agreeSet) request(rng *rand.Rand, limits []ratelimit.Limit) ratelimit.Request {
	cost := rng.Int64N(s.maxCost + 1)
	if s.maxCost > 10 && rng.IntN(2) == 0 {
		cost = rng.Int64N(4)
	}
	return ratelimit.Request{Name: "agree", Key: fmt.Sprint("k", rng.IntN(3)), Cost: cost, Limits: limits}
}

// agreeSets returns, for every algorithm, limits of small, tiny (1µs and
// 7µs), fractional-rate and daily billion-unit periods, with bursts and
// capacities above and below the threshold, and mixed multi-limit sets.
func agreeSets() []agreeSet {
	var sets []agreeSet
	for _, alg := range ratelimit.Algorithms() {
		with := func(l ratelimit.Limit) ratelimit.Limit { l.Algorithm = alg; return l }
		a := string(alg)
		sets = append(sets,
			agreeSet{name: a + "/5per100ms", limits: []ratelimit.Limit{with(ratelimit.Limit{Period: 100 * time.Millisecond, Threshold: 5})}, maxCost: 3},
			agreeSet{name: a + "/7per1s", limits: []ratelimit.Limit{with(ratelimit.Limit{Period: time.Second, Threshold: 7})}, maxCost: 3},
			agreeSet{name: a + "+sliding_log", limits: []ratelimit.Limit{
				with(ratelimit.Limit{Period: 50 * time.Millisecond, Threshold: 3}),
				{Period: time.Second, Threshold: 20},
			}, maxCost: 2},
		)
		// The windows count in whole milliseconds, the others in µs.
		tiny := []time.Duration{7 * time.Microsecond, time.Microsecond}
		if alg == ratelimit.FixedWindow || alg == ratelimit.SlidingWindow {
			tiny = []time.Duration{7 * time.Millisecond, time.Millisecond}
		}
		sets = append(sets,
			agreeSet{name: a + "/2per" + tiny[0].String(), limits: []ratelimit.Limit{with(ratelimit.Limit{Period: tiny[0], Threshold: 2})}, maxCost: 2},
			agreeSet{name: a + "/3per" + tiny[1].String(), limits: []ratelimit.Limit{with(ratelimit.Limit{Period: tiny[1], Threshold: 3})}, maxCost: 3},
		)
		switch alg {
		case ratelimit.SlidingLog: // a log of a billion entries is not a test
		case ratelimit.SlidingWindow: // its largest threshold
			sets = append(sets, agreeSet{name: a + "/max-per24h", limits: []ratelimit.Limit{with(ratelimit.Limit{Period: 24 * time.Hour, Threshold: ratelimit.MaxSlidingWindowThreshold})}, maxCost: 3e7})
		default:
			sets = append(sets, agreeSet{name: a + "/1e9per24h", limits: []ratelimit.Limit{with(ratelimit.Limit{Period: 24 * time.Hour, Threshold: 1e9})}, maxCost: 4e8})
		}
		switch alg {
		case ratelimit.TokenBucket, ratelimit.GCRA:
			sets = append(sets,
				agreeSet{name: a + "/burst10", limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 3, Burst: 10}}, maxCost: 10},
				agreeSet{name: a + "/burst1", limits: []ratelimit.Limit{{Algorithm: alg, Period: 30 * time.Millisecond, Threshold: 7, Burst: 1}}, maxCost: 1},
				agreeSet{name: a + "/burst3e9per24h", limits: []ratelimit.Limit{{Algorithm: alg, Period: 24 * time.Hour, Threshold: 1e9 + 7, Burst: 3e9}}, maxCost: 2e9},
			)
		case ratelimit.LeakyBucket:
			sets = append(sets,
				agreeSet{name: a + "/capacity10", limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 3, Capacity: 10}}, maxCost: 4},
				agreeSet{name: a + "/capacity2", limits: []ratelimit.Limit{{Algorithm: alg, Period: 30 * time.Millisecond, Threshold: 7, Capacity: 2}}, maxCost: 2},
			)
		}
	}
	for _, alg := range ratelimit.Algorithms() {
		sets = append(sets, agreeSet{name: string(alg) + "/skew", limits: []ratelimit.Limit{{Algorithm: alg, Period: 20 * time.Millisecond, Threshold: 4}}, maxCost: 2, skew: true})
	}
	windows := func(p time.Duration, t int64) [][]ratelimit.Limit {
		return [][]ratelimit.Limit{{{Algorithm: ratelimit.FixedWindow, Period: p, Threshold: t}}, {{Algorithm: ratelimit.SlidingWindow, Period: p, Threshold: t}}}
	}
	buckets := [][]ratelimit.Limit{
		{{Algorithm: ratelimit.TokenBucket, Period: 50 * time.Millisecond, Threshold: 3, Burst: 5}},
		{{Algorithm: ratelimit.LeakyBucket, Period: 50 * time.Millisecond, Threshold: 3, Capacity: 4}},
		{{Algorithm: ratelimit.GCRA, Period: 50 * time.Millisecond, Threshold: 3, Burst: 2}},
		// An override changes the threshold; the state is kept, and a
		// fraction in 3rds is read in 7ths.
		{{Algorithm: ratelimit.GCRA, Period: 50 * time.Millisecond, Threshold: 7}},
	}
	sets = append(sets,
		agreeSet{name: "window algorithm changes", limits: windows(30*time.Millisecond, 5)[0], maxCost: 2, others: windows(30*time.Millisecond, 5)},
		agreeSet{name: "window algorithm changes/skew", limits: windows(30*time.Millisecond, 5)[0], maxCost: 2, others: windows(30*time.Millisecond, 5), skew: true},
		agreeSet{name: "bucket algorithm changes", limits: buckets[0], maxCost: 2, others: buckets},
		agreeSet{name: "bucket algorithm changes/skew", limits: buckets[0], maxCost: 2, others: buckets, skew: true},
	)
	return append(sets,
		agreeSet{name: "fixed+sliding+token", limits: []ratelimit.Limit{
			{Algorithm: ratelimit.FixedWindow, Period: 100 * time.Millisecond, Threshold: 4},
			{Algorithm: ratelimit.SlidingWindow, Period: 300 * time.Millisecond, Threshold: 9},
			{Algorithm: ratelimit.TokenBucket, Period: time.Second, Threshold: 20, Burst: 6},
		}, maxCost: 2},
		agreeSet{name: "gcra+leaky+log", limits: []ratelimit.Limit{
			{Algorithm: ratelimit.GCRA, Period: 70 * time.Millisecond, Threshold: 3, Burst: 5},
			{Algorithm: ratelimit.LeakyBucket, Period: 100 * time.Millisecond, Threshold: 6, Capacity: 4},
			{Algorithm: ratelimit.SlidingLog, Period: 400 * time.Millisecond, Threshold: 10},
		}, maxCost: 3},
		agreeSet{name: "all", limits: []ratelimit.Limit{
			{Algorithm: ratelimit.SlidingLog, Period: 200 * time.Millisecond, Threshold: 8},
			{Algorithm: ratelimit.FixedWindow, Period: 150 * time.Millisecond, Threshold: 6},
			{Algorithm: ratelimit.SlidingWindow, Period: 250 * time.Millisecond, Threshold: 7},
			{Algorithm: ratelimit.TokenBucket, Period: 90 * time.Millisecond, Threshold: 2, Burst: 4},
			{Algorithm: ratelimit.LeakyBucket, Period: 130 * time.Millisecond, Threshold: 5, Capacity: 3},
			{Algorithm: ratelimit.GCRA, Period: 110 * time.Millisecond, Threshold: 4, Burst: 3},
		}, maxCost: 3},
	)
}

// randomAdvance returns a step of the clock at scales from a microsecond
// to hours, occasionally backwards (another process's clock behind).
func randomAdvance(rng *rand.Rand) time.Duration {
	us := time.Microsecond
	switch r := rng.IntN(100); {
	case r < 15:
		return 0
	case r < 35:
		return time.Duration(rng.IntN(20)) * us
	case r < 70:
		return time.Duration(rng.IntN(40_000)) * us
	case r < 88:
		return time.Duration(rng.IntN(400_000)) * us
	case r < 94:
		return time.Duration(rng.Int64N(int64(3*time.Hour/us))) * us
	default:
		return -time.Duration(rng.IntN(30_000)) * us
	}
}

// TestBackendsAgree feeds the same random sequence of calls (time step,
// key, cost) to both backends, with time pinned by the clock option, for
// every algorithm alone and in mixed sets, and requires identical
// decisions; and a Redis limiter with a small deny cache, whose repeated
// denials the twin must make too.
func TestBackendsAgree(t *testing.T) {
	cached := 0
	// The cache repeats only denials that leave nothing (see denyCache);
	// TestDenyCacheAnswersAsRedisWould exercises it at length.
	defer func() { assert.Greater(t, cached, 200, "denials the deny cache repeated") }()
	for _, set := range agreeSets() {
		t.Run(set.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 2; seed++ {
				untilCalm(t, stalledMsg, func() bool {
					c, calm := backendsAgree(t, set, seed)
					cached += c
					return calm
				})
			}
		})
	}
}

// backendsAgree runs seed's sequence of calls of set for TestBackendsAgree
// on fresh keys, and returns how many denials the deny cache repeated, and
// false if the sequence stalled in real time (see realTimeGuard) before it
// ended, having checked every call before the stall.
func backendsAgree(t *testing.T, set agreeSet, seed uint64) (cached int, calm bool) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(set.name))))
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	red := newTestRedis(t, ratelimit.WithClock(clock))
	gen := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("generic:"), withGenericScript(), WithDenyCache(0), withoutHeartbeat())
	// A deny cache of 4 entries, which 3 keys share, holding denials as
	// long as they last (the hold has tests of its own).
	cac := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("cached:"), WithDenyCache(4), WithDenyHold(time.Hour), withoutHeartbeat())
	guard := newRealTimeGuard(clock, set.all()...)
	admitted, denied := 0, 0
	slack := time.Duration(0) // -1 once the clock stepped back
	for i := range 300 {
		before := clock.Now()
		limits := set.step(rng, clock, i, 300)
		if clock.Now().Before(before) {
			slack = -1
		}
		req := set.request(rng, limits)
		if rng.IntN(3) == 0 {
			req.Cost = 1 // the calls the deny cache repeats, when nothing is left
		}
		guard.start()
		dm, dr, dg, dc := allow(t, mem, req), allow(t, red, req), allow(t, gen, req), allow(t, cac, req)
		if guard.stalled() {
			return 0, false
		}
		require.Equal(t, dm, dr, "seed %d call %d at %s: %+v", seed, i, clock.Now().Format(time.StampMicro), req)
		require.Equal(t, dr, dg, "generic script, seed %d call %d: %+v", seed, i, req)
		requireCacheAgrees(t, dm, dc, slack, "deny cache, seed %d call %d: %+v", seed, i, req)
		if dc.Source == ratelimit.SourceCache {
			cached++
		}
		if dm.Allowed {
			admitted++
		} else {
			denied++
		}
	}
	require.NotZero(t, admitted)
	require.NotZero(t, denied, "the sequence should reach the limit")
	return cached, true
}

// TestBackendsAgreeWhenTheClockStepsBackPastADroppedEntry runs a limit of
// each algorithm to the end of its state, moves on past it while other
// keys arrive (each new key makes the in-process twin look for idle
// entries to drop), then steps the clock back to before the state's end,
// as a call from a process whose clock is behind: both backends must still
// find the state, as the Redis key is still there.
func TestBackendsAgreeWhenTheClockStepsBackPastADroppedEntry(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			lim := ratelimit.Limit{Algorithm: alg, Period: 20 * time.Millisecond, Threshold: 4}
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			red := newTestRedis(t, ratelimit.WithClock(clock))
			call := func(key string, cost int64) {
				req := ratelimit.Request{Name: "back", Key: key, Cost: cost, Limits: []ratelimit.Limit{lim}}
				require.Equal(t, allow(t, mem, req), allow(t, red, req), "%s at %s", key, clock.Now().Format(time.StampMicro))
			}
			call("busy", 4)
			// The 500 calls move the pinned clock less than the real time
			// they take, in which the key's TTL runs down: hold it.
			restore := holdTTL(t, rdb(t), red.Key("back", "busy", 0, alg))
			clock.Advance(45 * time.Millisecond) // past every algorithm's state
			for i := range 500 {
				call(fmt.Sprint("other", i), 1)
			}
			restore(45 * time.Millisecond)
			clock.Advance(-40 * time.Millisecond)
			call("busy", 1)
		})
	}
}

// holdTTL stops the TTL of a Redis key written on a pinned clock from
// running down in real time while a test makes calls that take longer than
// the pinned time they span. The returned func gives the key back its TTL
// less passed, the pinned time that passed. A key whose expiry is on the
// pinned clock (a window's, in 2100) has no TTL to hold.
func holdTTL(t *testing.T, c *redis.Client, key string) (restore func(passed time.Duration)) {
	ctx := context.Background()
	ttl, err := c.PTTL(ctx, key).Result()
	require.NoError(t, err)
	if ttl <= 0 || ttl > 24*time.Hour {
		return func(time.Duration) {}
	}
	require.NoError(t, c.Persist(ctx, key).Err())
	return func(passed time.Duration) {
		require.NoError(t, c.PExpire(ctx, key, ttl-passed).Err())
	}
}

// stallLimit is how much more real time than pinned time may pass from
// the start of a step that sets a Redis key's TTL on a pinned clock to the
// end of a step that reads the key, before the key may be gone although
// the pinned clock says its state still matters: every TTL is the state's
// end plus a second (keepMs; see lua/decide.lua.tmpl) and runs down in
// real time. A tenth of a second is kept for the server's cached time.
const stallLimit = 900 * time.Millisecond

// realTimeGuard tells a sequence of calls on a pinned clock when a Redis
// key of a sliding log or a bucket may have expired in real time (a
// window's key expires on the pinned clock) while its state still
// mattered. A key whose TTL step j set (to the state's end plus keepMs,
// in real time) can be gone in step i, its state still mattering, only if
// the lag (real time less pinned time) grew by more than a second from j's
// start to i's end, and j's pinned time is within the limits' longest
// stateSpan before i's; stalled tells when the lag grew by more than
// stallLimit from the start of any such step, so a disagreement in a step
// where no key can have expired is still checked.
type realTimeGuard struct {
	clock *manualClock
	span  time.Duration // the longest stateSpan of the sequence's limits
	began time.Time     // real
	steps []guardStep   // the steps so far
}

// guardStep is a step's pinned time and its lag at its start.
type guardStep struct {
	pinned time.Time
	lag    time.Duration
}

// newRealTimeGuard returns the guard of a sequence of calls of limits on
// clock.
func newRealTimeGuard(clock *manualClock, limits ...ratelimit.Limit) *realTimeGuard {
	g := &realTimeGuard{clock: clock, began: time.Now()}
	for _, l := range limits {
		g.span = max(g.span, stateSpan(l))
	}
	return g
}

// lag returns how much more real time than pinned time has passed since
// the guard began (the pinned time from the first step's).
func (g *realTimeGuard) lag() time.Duration {
	d := time.Since(g.began)
	if len(g.steps) > 0 {
		d -= g.clock.Now().Sub(g.steps[0].pinned)
	}
	return d
}

// start marks the start of a step: after the clock moved, before its
// first call.
func (g *realTimeGuard) start() {
	if len(g.steps) == 0 {
		g.began = time.Now()
	}
	g.steps = append(g.steps, guardStep{g.clock.Now(), g.lag()})
}

// stalled reports, after a step's calls and before they are checked,
// whether a key the sequence wrote may have expired in real time while
// its state still mattered on the pinned clock.
func (g *realTimeGuard) stalled() bool {
	now, lag := g.clock.Now(), g.lag()
	for _, s := range g.steps {
		if now.Sub(s.pinned) < g.span && lag-s.lag > stallLimit {
			return true
		}
	}
	return false
}

// stateSpan returns how long past a call that sets its key's TTL the state
// of limit lim can matter: a bucket's drain time; two periods for a
// sliding log, whose TTL a call sets a period or more before its newest
// entry leaves the window (and for a window, whose key never expires in
// real time on a pinned clock).
func stateSpan(lim ratelimit.Limit) time.Duration {
	switch lim.AlgorithmOrDefault() {
	case ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.LeakyBucket:
		q, _ := muldiv.Rem(lim.MaxCost(), lim.Period.Microseconds(), lim.Threshold)
		return time.Duration(q+1) * us
	default:
		return 2 * lim.Period
	}
}

// stalledMsg says why untilCalm ran a sequence again whose
// realTimeGuard said it stalled.
var stalledMsg = fmt.Sprintf("stalled for more than %s of real time past the pinned clock", stallLimit)

// untilCalm runs attempt, a run of calls on fresh keys that returns false
// when it was void (it says why), until one runs through, for up to two
// minutes: a loaded machine stalls a test now and then, but not every run.
func untilCalm(t *testing.T, why string, attempt func() (calm bool)) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for runs := 1; !attempt(); runs++ {
		if time.Now().After(deadline) {
			t.Fatalf("each of %d runs %s", runs, why)
		}
		t.Logf("run %d %s; running it again on fresh keys", runs, why)
	}
}
