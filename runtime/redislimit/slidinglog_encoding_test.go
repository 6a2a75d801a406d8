package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// parseLogEntry reads an entry of a sliding log's list: "ts", "-ts"
// (marked), "ts:w" or "-ts:w" (weighing w units; see check sliding_log in
// lua/sliding_log.lua.tmpl).
func parseLogEntry(t testing.TB, entry string) (at, weight int64, marked bool) {
	t.Helper()
	at, weight, _, marked = parseHeldEntry(t, entry)
	return at, weight, marked
}

// parseHeldEntry is parseLogEntry of an entry that may be held, "ts:w:k"
// (w >= 2), also returning its hold k (0: none).
func parseHeldEntry(t testing.TB, entry string) (at, weight, hold int64, marked bool) {
	t.Helper()
	parts := strings.Split(entry, ":")
	require.LessOrEqual(t, len(parts), 3, "entry %q", entry)
	at, err := strconv.ParseInt(parts[0], 10, 64)
	require.NoError(t, err, "entry %q", entry)
	weight = 1
	if len(parts) > 1 {
		weight, err = strconv.ParseInt(parts[1], 10, 64)
		require.NoError(t, err, "entry %q", entry)
		require.Greater(t, weight, int64(1), "entry %q", entry)
	}
	if len(parts) > 2 {
		hold, err = strconv.ParseInt(parts[2], 10, 64)
		require.NoError(t, err, "entry %q", entry)
		require.Positive(t, hold, "entry %q", entry)
	}
	return max(at, -at), weight, hold, at < 0
}

// logUnits reads a sliding log's list and returns its units, checking
// that its count, if it has one, is the weights' surplus over one unit an
// entry, and that it has one only while it holds weighted entries.
func logUnits(t testing.TB, c redis.Cmdable, key string) int64 {
	t.Helper()
	list, err := c.LRange(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	var count, surplus, units int64
	held := false // the count reads "!x": the log may hold held entries
	if len(list) > 0 && (strings.HasPrefix(list[0], "#") || strings.HasPrefix(list[0], "!")) {
		held = list[0][0] == '!'
		count, err = strconv.ParseInt(list[0][1:], 10, 64)
		require.NoError(t, err, "count %q", list[0])
		require.Positive(t, count, "a count of 0 is no count")
		list = list[1:]
	}
	for _, e := range list {
		_, w, hold, _ := parseHeldEntry(t, e)
		require.True(t, hold == 0 || held, "a held entry in %s without a held count (\"!x\"): %q", key, list)
		units, surplus = units+w, surplus+w-1
	}
	require.Equal(t, surplus, count, "the count of %s: %q", key, list)
	return units
}

// scriptWork is what the server did for a run of calls: the commands the
// scripts ran (every command counted in INFO commandstats but the scripts'
// own EVALSHA and the test's bookkeeping), and the server's time in
// EVALSHA (µs).
type scriptWork struct {
	commands, usec int64
}

// bookkeeping are the commands a test or a client runs around the
// scripts, which scriptWork leaves out.
var bookkeeping = map[string]bool{
	"evalsha": true, "eval": true, "config": true, "info": true, "ping": true,
	"hello": true, "client": true, "script": true, "select": true, "memory": true,
}

// measureWork resets the server's command statistics, runs calls, and
// returns the work they made the server do.
func measureWork(t *testing.T, c *redis.Client, calls func()) scriptWork {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.ConfigResetStat(ctx).Err())
	calls()
	info, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var w scriptWork
	for line := range strings.Lines(info) {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for field := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch {
			case k == "calls" && !bookkeeping[name]:
				w.commands += n
			case k == "usec" && name == "evalsha":
				w.usec += n
			}
		}
	}
	return w
}

// TestSlidingLogCostDoesNotGrowWithUnits: a sliding log keeps one entry
// per call whatever its cost, so two calls of cost 5,120 leave at most a
// kilobyte in Redis, a call of cost 1 at most 16 bytes, and a call of cost
// 5,120 makes its script run no more commands, nor the log grow by more
// entries, than twice a call of cost 1 does; its script's time in the
// server is also at most twice a cost-1 call's (the median of rounds that
// alternate them, sampled until it holds, under a deadline).
func TestSlidingLogCostDoesNotGrowWithUnits(t *testing.T) {
	for _, generic := range []bool{false, true} {
		t.Run(fmt.Sprintf("generic=%v", generic), func(t *testing.T) {
			ctx := context.Background()
			var opts []Option
			if generic {
				opts = append(opts, withGenericScript())
			}
			l := newTestRedis(t, opts...)
			c := rdb(t)
			lim := ratelimit.Limit{Period: time.Hour, Threshold: 1 << 40}
			call := func(key string, cost int64) {
				d := allow(t, l, ratelimit.Request{Name: "cost", Key: key, Cost: cost, Limits: []ratelimit.Limit{lim}})
				require.True(t, d.Allowed)
			}
			usage := func(key string) int64 {
				n, err := c.MemoryUsage(ctx, l.Key("cost", key, 0, ratelimit.SlidingLog), 0).Result()
				require.NoError(t, err)
				return n
			}
			length := func(key string) int64 {
				return c.LLen(ctx, l.Key("cost", key, 0, ratelimit.SlidingLog)).Val()
			}

			call("two", 5120)
			call("two", 5120)
			t.Logf("two calls of cost 5,120: %d bytes", usage("two"))
			assert.LessOrEqual(t, usage("two"), int64(1024), "two calls of cost 5,120")

			call("ones", 1)
			before := usage("ones")
			for range 1000 {
				call("ones", 1)
			}
			perCall := float64(usage("ones")-before) / 1000
			t.Logf("a call of cost 1: %.1f bytes", perCall)
			assert.LessOrEqual(t, perCall, 16.0, "bytes a call of cost 1 adds")

			// The work of 100 calls of each cost, each on a log of its
			// own that already has a call of that cost.
			const calls = 100
			work := func(cost int64) (scriptWork, int64) {
				key := fmt.Sprint("w", cost)
				before := length(key)
				w := measureWork(t, c, func() {
					for range calls {
						call(key, cost)
					}
				})
				return w, length(key) - before
			}
			call("w1", 1)
			call("w5120", 5120)
			one, grewOne := work(1)
			big, grewBig := work(5120)
			t.Logf("per call, cost 1: %.2f commands, %d entries; cost 5,120: %.2f commands, %d entries",
				float64(one.commands)/calls, grewOne/calls, float64(big.commands)/calls, grewBig/calls)
			assert.LessOrEqual(t, big.commands, 2*one.commands, "commands a cost-5,120 call's script runs")
			assert.LessOrEqual(t, grewBig, 2*grewOne, "entries a cost-5,120 call adds")

			var ratios []float64
			deadline := time.Now().Add(time.Minute)
			for {
				one, _ := work(1)
				big, _ := work(5120)
				ratios = append(ratios, float64(big.usec)/float64(max(one.usec, 1)))
				sorted := slices.Sorted(slices.Values(ratios))
				median := sorted[len(sorted)/2]
				if len(ratios) >= 5 && median <= 2 {
					t.Logf("EVALSHA time, cost 5,120 / cost 1: median %.2f of %d rounds %.2f", median, len(ratios), ratios)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a cost-5,120 call's script took %.2f× a cost-1 call's (median of %d rounds)", median, len(ratios))
				}
			}
		})
	}
}

// weightedLogSets are sliding logs of tokens, whose calls cost from 1 to
// 5,120 units (half of them 0 to 3), alone, with the clock stepping back,
// and beside a log that counts calls (a line without cost=).
func weightedLogSets() []agreeSet {
	tokens := ratelimit.Limit{Period: time.Second, Threshold: 8_000}
	return []agreeSet{
		{name: "tokens", limits: []ratelimit.Limit{tokens}, maxCost: 5120},
		// The clock steps back by up to two periods: short ones, for the
		// real-time guard.
		{name: "tokens/skew", limits: []ratelimit.Limit{{Period: 20 * time.Millisecond, Threshold: 8_000}}, maxCost: 5120, skew: true},
		{name: "tokens+calls", limits: []ratelimit.Limit{
			tokens,
			{Period: 300 * time.Millisecond, Threshold: 9, PerCall: true},
			{Period: 5 * time.Second, Threshold: 30_000},
		}, maxCost: 5120},
	}
}

// requireLogsCounted checks every sliding log key on the test server: its
// count is its weights' surplus (see logUnits).
func requireLogsCounted(t *testing.T, c *redis.Client) {
	t.Helper()
	keys, err := c.Keys(context.Background(), "*:log").Result()
	require.NoError(t, err)
	for _, key := range keys {
		logUnits(t, c, key)
	}
}

// TestWeightedLogBackendsAgree: calls of costs up to 5,120 units, each
// one weighted entry in Redis, with reservations refunded (often a part
// of an entry) and settled with debts on top, are decided as the twin
// decides them, by the script of the limit, the generic script and a
// limiter with a deny cache; and every log keeps its count right.
func TestWeightedLogBackendsAgree(t *testing.T) {
	for _, set := range weightedLogSets() {
		t.Run(set.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				untilCalm(t, stalledMsg, func() bool {
					_, calm := backendsAgree(t, set, seed)
					return calm
				})
				requireLogsCounted(t, rdb(t))
				untilCalm(t, stalledMsg, func() bool { return reserveAgree(t, set, seed) })
				requireLogsCounted(t, rdb(t))
			}
		})
	}
}

// weightedLinesAgree: on a cluster, where a call's lines with different
// keys are refunded when another denies, calls of costs up to 5,120 are
// decided and refunded as the twin decides them.
func (ct *clusterTest) weightedLinesAgree(t *testing.T) {
	set := agreeSet{name: "tokens+calls", limits: []ratelimit.Limit{
		{Period: time.Second, Threshold: 8_000},
		{Period: 300 * time.Millisecond, Threshold: 9, PerCall: true},
	}, maxCost: 5120}
	for seed := uint64(1); seed <= 2; seed++ {
		untilCalm(t, stalledMsg, func() bool {
			return linesAgree(t, set, seed, func(clock ratelimit.Clock) ratelimit.Limiter {
				l, _ := ct.limiter(t, ratelimit.WithClock(clock))
				return l
			})
		})
	}
}

// TestWeightedLogReadsTheUnitEncoding is a rolling deploy: a log written
// by the previous encoding's script (testdata/sliding_log_unit_entries.lua,
// one plain or marked entry per unit, for a limit of 100 per second) is
// read by the new scripts, an old entry weighing 1, and the decisions on
// it are the twin's throughout, the old script's too while the log has no
// count; once it has one, the old script fails before it writes anything.
func TestWeightedLogReadsTheUnitEncoding(t *testing.T) {
	src, err := os.ReadFile("testdata/sliding_log_unit_entries.lua")
	require.NoError(t, err)
	old := redis.NewScript(string(src))
	ctx := context.Background()
	lim := ratelimit.Limit{Period: time.Second, Threshold: 100}
	for _, generic := range []bool{false, true} {
		t.Run(fmt.Sprintf("generic=%v", generic), func(t *testing.T) {
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			opts := []Option{ratelimit.WithClock(clock)}
			if generic {
				opts = append(opts, withGenericScript())
			}
			red := newTestRedis(t, opts...)
			c := rdb(t)
			key := red.Key("mig", "", 0, ratelimit.SlidingLog)
			req := ratelimit.Request{Name: "mig", Limits: []ratelimit.Limit{lim}}
			rng := rand.New(rand.NewPCG(3, 4))
			byOld := func(cost int64) {
				res, err := old.Run(ctx, c, []string{key}, cost, clock.Now().UnixMicro()).Result()
				require.NoError(t, err)
				d, err := parseDecision(res)
				require.NoError(t, err)
				req.Cost = cost
				require.Equal(t, allow(t, mem, req), d, "the old script at %s, cost %d", clock.Now().Format(time.StampMicro), cost)
			}
			byNew := func(cost int64) {
				req.Cost = cost
				require.Equal(t, allow(t, mem, req), allow(t, red, req), "at %s, cost %d", clock.Now().Format(time.StampMicro), cost)
			}
			// The old script fills the log, past its limit, and lets it
			// trim; each call logs cost plain entries, marked as it sets
			// the TTL.
			for range 120 {
				clock.Advance(time.Duration(rng.IntN(30_000)) * time.Microsecond)
				byOld(1 + rng.Int64N(5))
			}
			list := c.LRange(ctx, key, 0, -1).Val()
			require.Greater(t, len(list), 50, "the old encoding's log")
			require.True(t, slices.ContainsFunc(list, func(e string) bool { return strings.HasPrefix(e, "-") }), "a marked entry: %q", list)
			// Cost-1 calls of both generations on the same log, then the
			// new ones of any cost.
			for i := range 200 {
				clock.Advance(time.Duration(rng.IntN(20_000)) * time.Microsecond)
				switch {
				case i < 40 && i%2 == 0:
					byOld(1)
				case i < 40:
					byNew(1)
				default:
					byNew(1 + rng.Int64N(30))
				}
				logUnits(t, c, key)
			}
			// The log has a count now: the old script fails, having
			// written nothing.
			if !strings.HasPrefix(c.LIndex(ctx, key, 0).Val(), "#") {
				clock.Advance(time.Millisecond)
				byNew(7)
			}
			before := c.LRange(ctx, key, 0, -1).Val()
			require.True(t, strings.HasPrefix(before[0], "#"), "a count: %q", before)
			_, err = old.Run(ctx, c, []string{key}, 1, clock.Now().UnixMicro()).Result()
			require.ErrorContains(t, err, "arithmetic")
			require.Equal(t, before, c.LRange(ctx, key, 0, -1).Val(), "the failed old script wrote nothing")
		})
	}
}

// TestWeightedLogPaths takes a log of weighted and plain entries down
// each path of its scripts, on the twin, the limit's script and the
// generic one alike: a denial whose retry is found past a run of
// entries, trims that keep the count and trims that drop it, a refund
// that takes part of an entry and one that takes a marked entry, a debt
// on top, and Peek; after each step every log's count is right.
func TestWeightedLogPaths(t *testing.T) {
	ctx := context.Background()
	lim := ratelimit.Limit{Period: time.Second, Threshold: 2_000}
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	red := newTestRedis(t, ratelimit.WithClock(clock))
	gen := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("generic:"), withGenericScript(), WithDenyCache(0), withoutHeartbeat())
	reds := []*Limiter{red, gen}
	c := rdb(t)
	req := func(cost int64) ratelimit.Request {
		return ratelimit.Request{Name: "paths", Cost: cost, Limits: []ratelimit.Limit{lim}}
	}
	step := 0
	call := func(cost int64) ratelimit.Decision {
		t.Helper()
		step++
		want := allow(t, mem, req(cost))
		for _, l := range reds {
			require.Equal(t, want, allow(t, l, req(cost)), "step %d, cost %d", step, cost)
		}
		requireLogsCounted(t, c)
		return want
	}
	reserve := func(cost int64) time.Time {
		t.Helper()
		step++
		want, at, err := mem.Reserve(ctx, req(cost))
		require.NoError(t, err)
		require.True(t, want.Allowed, "step %d", step)
		for _, l := range reds {
			d, rat, err := l.Reserve(ctx, req(cost))
			require.NoError(t, err)
			require.Equal(t, want, d, "step %d, cost %d", step, cost)
			require.Equal(t, at, rat)
		}
		requireLogsCounted(t, c)
		return at
	}
	settle := func(cost int64, at time.Time, delta int64) {
		t.Helper()
		require.NoError(t, mem.Adjust(ctx, req(cost), at, delta))
		for _, l := range reds {
			require.NoError(t, l.Adjust(ctx, req(cost), at, delta))
		}
		requireLogsCounted(t, c)
		want, err := ratelimit.Peek(ctx, mem, req(1))
		require.NoError(t, err)
		for _, l := range reds {
			d, err := ratelimit.Peek(ctx, l, req(1))
			require.NoError(t, err)
			require.Equal(t, want, d, "peek after a settle of %d", delta)
		}
	}
	tick := func() { clock.Advance(time.Microsecond) }

	// 100 plain entries, then 30 of 50 units: 1,600 units.
	for range 100 {
		call(1)
		tick()
	}
	for range 30 {
		call(50)
		tick()
	}
	// The 600th unit, in the 10th weighted entry (logged 21µs ago), is
	// past the first 64 entries.
	d := call(1000)
	require.False(t, d.Allowed)
	require.Equal(t, time.Second-21*time.Microsecond, d.RetryAfter)
	// The plain entries and 6 weighted ones leave at once: a bisect that
	// keeps the count.
	clock.Advance(time.Second - 25*time.Microsecond)
	require.True(t, call(7).Allowed)
	tick()
	// The rest of the weighted leave, leaving the call of 7 alone: the
	// count stays, then goes with it.
	clock.Advance(30 * time.Microsecond)
	require.True(t, call(1).Allowed)
	clock.Advance(time.Second)
	require.True(t, call(1).Allowed)
	require.False(t, strings.HasPrefix(c.LIndex(ctx, red.Key("paths", "", 0, ""), 0).Val(), "#"), "no weighted entry, no count")

	// A reservation that marks its entry (the log emptied), refunded in
	// part, then in full: the mark moves to the newest entry left.
	clock.Advance(3 * time.Second)
	at := reserve(900)
	tick()
	call(3)
	settle(900, at, -500)
	settle(900, at, -400)
	// A debt on top, and a reservation whose refund leaves it at weight 1.
	tick()
	at = reserve(40)
	settle(40, at, 25)
	settle(40, at, -39)
	for range 40 {
		clock.Advance(25 * time.Millisecond)
		call(1 + int64(step%7)*97)
	}
}
