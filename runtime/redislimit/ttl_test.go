package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/memstate"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// ttlBound returns the longest TTL lua/decide.lua.tmpl documents for a key of
// lim, a sliding log or a bucket: a second past the latest time its state
// can matter, counted from the write that sets the TTL, plus a millisecond
// of rounding. (A window's key expires exactly a second after its state
// ends: see checkWindowKey.)
func ttlBound(lim ratelimit.Limit) time.Duration {
	switch lim.AlgorithmOrDefault() {
	case ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.LeakyBucket:
		// The end of the second the TAT is in, which is at most a full
		// bucket's drain time ahead.
		return stateSpan(lim) + 2*time.Second + time.Millisecond
	default: // past a log's newest entry
		return stateSpan(lim) + time.Second + time.Millisecond
	}
}

// TestEveryKeyOutlivesItsStateWithinTheDocumentedTTL runs random calls of
// every algorithm on Redis with a pinned clock, and the same calls on the
// in-process twin, which knows when each key's state stops mattering. After
// every call, the key called must have a TTL of at least a second past that
// time and at most the documented bound; at the end, every key.
func TestEveryKeyOutlivesItsStateWithinTheDocumentedTTL(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		for _, lim := range []ratelimit.Limit{
			{Algorithm: alg, Period: 30 * time.Second, Threshold: 5},
			{Algorithm: alg, Period: time.Second, Threshold: 3},
			{Algorithm: alg, Period: 10 * time.Millisecond, Threshold: 4},
		} {
			t.Run(lim.String(), func(t *testing.T) {
				untilCalm(t, stalledMsg, func() bool { return keysOutliveTheirState(t, lim) })
			})
		}
	}
}

// keysOutliveTheirState runs TestEveryKeyOutlivesItsStateWithinTheDocumentedTTL's
// calls of lim on fresh keys, and returns false if they stalled in real
// time (see realTimeGuard) before they ended, having checked every call
// before the stall.
func keysOutliveTheirState(t *testing.T, lim ratelimit.Limit) (calm bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(lim.Period), 3))
	clock := newManualClock()
	red := newTestRedis(t, ratelimit.WithClock(clock))
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	c := rdb(t)
	guard := newRealTimeGuard(clock, lim)
	began := time.Now() // TTLs run down in real time
	// checkKey checks the TTL of key k against the state the
	// in-process twin holds for it.
	checkKey := func(k int) {
		if lim.Algorithm == ratelimit.FixedWindow || lim.Algorithm == ratelimit.SlidingWindow {
			checkWindowKey(t, c, red, mem, lim, k, clock.Now())
			return
		}
		now := clock.Now().UnixMicro()
		key := red.Key("ttl", fmt.Sprint(k), 0, lim.Algorithm)
		ttl := c.PTTL(ctx, key).Val()
		slack := time.Since(began) + time.Millisecond // the real time the TTL ran down
		e, ok := memstate.Lookup(mem, "ttl", fmt.Sprint(k))
		if !ok || e.Expiry <= now {
			return // no state that still matters; the key may be gone
		}
		matters := time.Duration(e.Expiry-now) * us
		assert.GreaterOrEqual(t, ttl, matters+time.Second-slack, "%s: state matters for %s", key, matters)
		assert.LessOrEqual(t, ttl, ttlBound(lim), key)
	}
	for range 200 {
		clock.Advance(time.Duration(rng.Int64N(int64(lim.Period/us)/4+1)) * us)
		k := rng.IntN(4)
		req := ratelimit.Request{Name: "ttl", Key: fmt.Sprint(k), Cost: 1 + rng.Int64N(2), Limits: []ratelimit.Limit{lim}}
		guard.start()
		dm, dr := allow(t, mem, req), allow(t, red, req)
		if guard.stalled() {
			return false
		}
		require.Equal(t, dm, dr)
		checkKey(k) // after every call, not only at the end
	}
	keys := c.Keys(ctx, "*").Val()
	require.NotEmpty(t, keys)
	for k := range 4 {
		checkKey(k)
	}
	if lim.Algorithm == ratelimit.FixedWindow || lim.Algorithm == ratelimit.SlidingWindow {
		return true // checked above
	}
	for _, key := range keys {
		ttl := c.PTTL(ctx, key).Val()
		slack := time.Since(began) + time.Millisecond
		assert.GreaterOrEqual(t, ttl, time.Second-slack, key)
		assert.LessOrEqual(t, ttl, ttlBound(lim), key)
	}
	return true
}

// checkWindowKey checks that the key of window limit lim for key k expires
// exactly a second after the in-process twin's state of it stops
// mattering: the end of the window (fixed_window) or of the next
// (sliding_window). Its expiry is on the pinned clock, not the server's
// (see WithClock).
func checkWindowKey(t *testing.T, c *redis.Client, red *Limiter, mem *ratelimit.MemoryLimiter, lim ratelimit.Limit, k int, now time.Time) {
	t.Helper()
	e, ok := memstate.Lookup(mem, "ttl", fmt.Sprint(k))
	if !ok {
		return
	}
	w := e.Windows[0]
	if w.Count == 0 && w.Prev == 0 || w.StateEnd*1000 <= now.UnixMicro() {
		return // no counts, or they have stopped mattering
	}
	key := red.Key("ttl", fmt.Sprint(k), 0, lim.Algorithm)
	expiry, err := c.PExpireTime(context.Background(), key).Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(w.StateEnd)*time.Millisecond+time.Second, expiry, key)
	// And the state's end is within a window (two) of now, rounded up to a ms.
	left := time.Duration(expiry) - time.Second - time.Duration(now.UnixMilli())*time.Millisecond
	span := lim.Period
	if lim.Algorithm == ratelimit.SlidingWindow {
		span *= 2
	}
	assert.Positive(t, left, key)
	assert.LessOrEqual(t, left, span, key)
}

// TestEveryKeyHasATTLOnServerTime is the same run on the Redis server's
// clock, as in production, with a limit of each algorithm in one call. The
// TTLs it wants are those of a run within one 2 s window of the server's
// clock: past a window's end, its key has less than a second left, and is
// gone a second later while the calls of the next window, denied by the
// other limits, leave it no count. So a run that a window boundary (of
// the server's clock, which runs on in real time) cuts runs again.
func TestEveryKeyHasATTLOnServerTime(t *testing.T) {
	ctx := context.Background()
	var limits []ratelimit.Limit
	for _, alg := range ratelimit.Algorithms() {
		limits = append(limits, ratelimit.Limit{Algorithm: alg, Period: 2 * time.Second, Threshold: 5})
	}
	window := func(c *redis.Client) int64 {
		now, err := c.Time(ctx).Result()
		require.NoError(t, err)
		return now.UnixMilli() / limits[0].Period.Milliseconds()
	}
	untilCalm(t, "crossed a window boundary of the server's clock", func() bool {
		l := newTestRedis(t)
		c := rdb(t)
		first := window(c)
		for i := range 40 {
			_, err := l.Allow(ctx, ratelimit.Request{Name: "ttl", Key: fmt.Sprint(i % 3), Limits: limits})
			require.NoError(t, err)
		}
		keys := c.Keys(ctx, "*").Val()
		ttls := make([]time.Duration, len(keys))
		for i, key := range keys {
			ttls[i] = c.PTTL(ctx, key).Val()
		}
		if window(c) != first {
			return false
		}
		require.Len(t, keys, 3*len(limits))
		for i, key := range keys {
			switch ttl := ttls[i]; {
			case strings.HasSuffix(key, ":fw"): // a second past the window's end
				assert.Greater(t, ttl, time.Second, key)
				assert.LessOrEqual(t, ttl, 3*time.Second, key)
			case strings.HasSuffix(key, ":sw"): // a second past the next window's end
				assert.Greater(t, ttl, 3*time.Second, key)
				assert.LessOrEqual(t, ttl, 5*time.Second, key)
			default:
				assert.GreaterOrEqual(t, ttl, 900*time.Millisecond, key)
				assert.LessOrEqual(t, ttl, ttlBound(limits[0])+time.Second, key)
			}
		}
		return true
	})
}

// logExpiry follows when, in pinned time, a sliding log's key would
// expire: after each call it reads the key's TTL and removes it (PERSIST),
// so that a TTL read later was set by the call just made.
type logExpiry struct {
	t      *testing.T
	c      *redis.Client
	clock  *manualClock
	key    string
	period time.Duration
	expiry int64 // µs, pinned time
	sets   int   // how many calls set the TTL
}

// check follows a call just made and checks the key would expire at least
// a period and a second after its newest entry.
func (e *logExpiry) check() {
	e.t.Helper()
	ctx := context.Background()
	now := e.clock.Now().UnixMicro()
	if ttl := e.c.PTTL(ctx, e.key).Val(); ttl > 0 {
		e.expiry, e.sets = now+ttl.Microseconds(), e.sets+1
		require.NoError(e.t, e.c.Persist(ctx, e.key).Err())
	}
	last, err := e.c.LIndex(ctx, e.key, -1).Result()
	require.NoError(e.t, err)
	newest, _, _ := parseLogEntry(e.t, last)
	require.GreaterOrEqual(e.t, e.expiry, newest+e.period.Microseconds()+time.Second.Microseconds()-1000,
		"at %s the key would expire %s before its newest entry leaves the window",
		e.clock.Now().Format(time.StampMilli), time.Duration(newest+e.period.Microseconds()-e.expiry)*us)
}

// TestSlidingLogKeyOutlivesEveryEntry calls a sliding log on a pinned
// clock, first at an even pace, so that each call trims one entry, then at
// random paces and costs, with a pause now and then that empties the log,
// then fast enough to be denied, also by calls that set the TTL. After
// each call, the key must expire at least a period and a second after its
// newest entry (see logExpiry). At an even pace the TTL must be set about
// once a period, not at every trim.
func TestSlidingLogKeyOutlivesEveryEntry(t *testing.T) {
	for _, generic := range []bool{false, true} {
		t.Run(fmt.Sprintf("generic=%v", generic), func(t *testing.T) {
			clock := newManualClock()
			opts := []Option{ratelimit.WithClock(clock)}
			if generic {
				opts = append(opts, withGenericScript())
			}
			l := newTestRedis(t, opts...)
			lim := ratelimit.Limit{Period: 30 * time.Second, Threshold: 40}
			req := ratelimit.Request{Name: "outlive", Limits: []ratelimit.Limit{lim}}
			e := &logExpiry{t: t, c: rdb(t), clock: clock, key: l.Key("outlive", "", 0, ratelimit.SlidingLog), period: lim.Period}
			rng := rand.New(rand.NewPCG(5, 8))
			admitted, denied := 0, 0
			for i := range 600 {
				step, cost := time.Second, int64(1)
				if i >= 300 {
					step, cost = time.Duration(rng.Int64N(int64(3*time.Second))), 1+rng.Int64N(2)
				}
				if i >= 450 { // fast enough to be denied, also when trimming
					step = time.Duration(rng.Int64N(int64(time.Second)))
				}
				if i%97 == 96 {
					step = 2 * lim.Period // the log empties
				}
				clock.Advance(step)
				req.Cost = cost
				if d := allow(t, l, req); d.Allowed {
					admitted++
				} else {
					denied++
				}
				e.check()
				if i == 299 {
					assert.Equal(t, 300, admitted)
					assert.LessOrEqual(t, e.sets, 20, "the TTL was set at %d of 300 calls, each trimming one entry", e.sets)
				}
			}
			assert.NotZero(t, denied)
		})
	}
}

// TestSlidingLogDenialKeepsTheTTLMark has a call set the TTL (its trim pops
// the marked entry) and then be denied, so its own marked entries go: the
// newest entry left must carry the mark, or the calls that follow, each
// trimming one unmarked entry, would never set the TTL again. The key's
// expiry is followed by logExpiry.
func TestSlidingLogDenialKeepsTheTTLMark(t *testing.T) {
	lim := ratelimit.Limit{Period: 10 * time.Second, Threshold: 3}
	roomy := ratelimit.Limit{Period: 10 * time.Second, Threshold: 100}
	for _, v := range []struct {
		name    string
		generic bool
		limits  []ratelimit.Limit // the key watched is limit 0's
	}{
		{"one", false, []ratelimit.Limit{lim}},
		{"one/generic", true, []ratelimit.Limit{lim}},
		// The roomy limit admits the call that pops its mark, and is
		// rolled back when lim denies it.
		{"rolled back", false, []ratelimit.Limit{roomy, lim}},
	} {
		t.Run(v.name, func(t *testing.T) {
			clock := newManualClock()
			opts := []Option{ratelimit.WithClock(clock)}
			if v.generic {
				opts = append(opts, withGenericScript())
			}
			l := newTestRedis(t, opts...)
			e := &logExpiry{t: t, c: rdb(t), clock: clock, key: l.Key("mark", "", 0, ratelimit.SlidingLog), period: lim.Period}
			call := func(advance time.Duration, cost int64, want bool) {
				t.Helper()
				clock.Advance(advance)
				d := allow(t, l, ratelimit.Request{Name: "mark", Cost: cost, Limits: v.limits})
				require.Equal(t, want, d.Allowed, "at %s", clock.Now().Format(time.StampMilli))
				e.check()
			}
			call(0, 1, true)                      // the marked entry, at 0 s
			call(3*time.Second, 1, true)          // 3 s
			call(3*time.Second, 1, true)          // 6 s: full
			call(4500*time.Millisecond, 2, false) // 10.5 s: pops the mark, denied
			for range 30 {
				call(3500*time.Millisecond, 1, true) // each pops at most one entry
			}
		})
	}
}
