package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

func TestSlidingLogSequence(t *testing.T) {
	lim := []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 3}}
	type step struct {
		at        time.Duration // since start
		cost      int64
		allowed   bool
		remaining int64
		retry     time.Duration
		reset     time.Duration
	}
	steps := []step{
		{at: 0, allowed: true, remaining: 2, reset: 10 * time.Second},
		{at: time.Second, allowed: true, remaining: 1, reset: 10 * time.Second},
		{at: 2 * time.Second, allowed: true, remaining: 0, reset: 10 * time.Second},
		{at: 3 * time.Second, allowed: false, remaining: 0, retry: 7 * time.Second, reset: 9 * time.Second},
		{at: 9*time.Second + 999999*time.Microsecond, allowed: false, remaining: 0, retry: time.Microsecond, reset: 2*time.Second + time.Microsecond},
		// The call at 0 leaves the window exactly at 10s.
		{at: 10 * time.Second, allowed: true, remaining: 0, reset: 10 * time.Second},
		// At 11s the call at 1s has left; a cost of 2 also needs the one at 2s gone.
		{at: 11 * time.Second, cost: 2, allowed: false, remaining: 1, retry: time.Second, reset: 9 * time.Second},
		{at: 12 * time.Second, cost: 2, allowed: true, remaining: 0, reset: 10 * time.Second},
		{at: 12 * time.Second, allowed: false, remaining: 0, retry: 8 * time.Second, reset: 10 * time.Second},
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		start := clock.Now()
		l := newLimiter(ratelimit.WithClock(clock))
		for i, s := range steps {
			clock.Set(start.Add(s.at))
			d := allow(t, l, ratelimit.Request{Name: "seq", Cost: s.cost, Limits: lim})
			want := ratelimit.Decision{Allowed: s.allowed, Remaining: s.remaining, RetryAfter: s.retry, ResetAfter: s.reset}
			assert.Equal(t, want, d, "step %d at %s", i, s.at)
		}
	})
}

func TestSameMicrosecondCallsAreAllCounted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock())) // time never moves
		req := ratelimit.Request{Name: "burst", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 100}}}
		admitted := 0
		for range 150 {
			if allow(t, l, req).Allowed {
				admitted++
			}
		}
		assert.Equal(t, 100, admitted)
	})
}

func TestMultiLimitDenialChargesNothing(t *testing.T) {
	limits := []ratelimit.Limit{
		{Period: time.Second, Threshold: 2},
		{Period: time.Hour, Threshold: 3},
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		l := newLimiter(ratelimit.WithClock(clock))
		req := ratelimit.Request{Name: "multi", Limits: limits}
		assert.True(t, allow(t, l, req).Allowed)
		assert.True(t, allow(t, l, req).Allowed)
		d := allow(t, l, req)
		assert.False(t, d.Allowed)
		assert.Equal(t, 0, d.LimitIndex, "the per-second limit denied")
		assert.Equal(t, time.Second, d.RetryAfter)

		// The hourly limit was not charged by the denied call: one unit left.
		clock.Advance(time.Second)
		d = allow(t, l, req)
		assert.True(t, d.Allowed)
		assert.Equal(t, 1, d.LimitIndex, "the hourly limit has the fewest remaining")
		assert.Equal(t, int64(0), d.Remaining)

		clock.Advance(time.Second)
		d = allow(t, l, req)
		assert.False(t, d.Allowed)
		assert.Equal(t, 1, d.LimitIndex)
		assert.Equal(t, time.Hour-2*time.Second, d.RetryAfter)
	})
}

func TestDenialPicksLongestRetry(t *testing.T) {
	limits := []ratelimit.Limit{
		{Period: time.Second, Threshold: 1},
		{Period: time.Minute, Threshold: 1},
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		req := ratelimit.Request{Name: "pick", Limits: limits}
		require.True(t, allow(t, l, req).Allowed)
		d := allow(t, l, req)
		assert.False(t, d.Allowed)
		assert.Equal(t, 1, d.LimitIndex)
		assert.Equal(t, time.Minute, d.RetryAfter)
	})
}

func TestKeysAreSeparate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}
		for _, key := range []string{"", "alice", "bob", "{alice}", "alice:0", "a%3Alice"} {
			assert.True(t, allow(t, l, ratelimit.Request{Name: "svc.Get", Key: key, Limits: lim}).Allowed, "key %q", key)
			assert.False(t, allow(t, l, ratelimit.Request{Name: "svc.Get", Key: key, Limits: lim}).Allowed, "key %q", key)
		}
		assert.True(t, allow(t, l, ratelimit.Request{Name: "svc.Put", Key: "alice", Limits: lim}).Allowed)
	})
}

func TestClockSteppingBackKeepsCounting(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		l := newLimiter(ratelimit.WithClock(clock))
		req := ratelimit.Request{Name: "skew", Limits: []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 2}}}
		clock.Advance(5 * time.Second)
		require.True(t, allow(t, l, req).Allowed)
		clock.Advance(-3 * time.Second) // a different app server, 3s behind
		d0 := allow(t, l, req)
		require.True(t, d0.Allowed)
		assert.Equal(t, 13*time.Second, d0.ResetAfter)
		d := allow(t, l, req)
		require.False(t, d.Allowed)
		// Both entries are logged at the later time, so the retry and reset
		// are measured from it.
		assert.Equal(t, 13*time.Second, d.RetryAfter)
		assert.Equal(t, 13*time.Second, d.ResetAfter)
	})
}

func TestInvalidRequests(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter()
		ok := ratelimit.Limit{Period: time.Second, Threshold: 5}
		cases := map[string]ratelimit.Request{
			"no name":        {Limits: []ratelimit.Limit{ok}},
			"no limits":      {Name: "x"},
			"zero period":    {Name: "x", Limits: []ratelimit.Limit{{Threshold: 1}}},
			"zero threshold": {Name: "x", Limits: []ratelimit.Limit{{Period: time.Second}}},
			"negative cost":  {Name: "x", Cost: -1, Limits: []ratelimit.Limit{ok}},
			"unknown algo":   {Name: "x", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1, Algorithm: "magic"}}},
		}
		for name, req := range cases {
			_, err := l.Allow(context.Background(), req)
			assert.ErrorIs(t, err, ratelimit.ErrInvalidLimit, name)
			assert.NotErrorIs(t, err, ratelimit.ErrBackend, name)
		}
		_, err := l.Allow(context.Background(), ratelimit.Request{Name: "x", Cost: 6, Limits: []ratelimit.Limit{ok}})
		var ce *ratelimit.CostError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, int64(6), ce.Cost)
		assert.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
	})
}

func TestExactUnderConcurrencyAcrossClients(t *testing.T) {
	srv.Flush(t)
	const threshold = 50
	req := ratelimit.Request{Name: "race", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: threshold}}}
	limiters := []ratelimit.Limiter{New(rdb(t)), New(rdb(t))} // two independent clients, server time
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := limiters[g%len(limiters)]
			for range 5 {
				d, err := l.Allow(context.Background(), req)
				if !assert.NoError(t, err) {
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(threshold), admitted.Load())
}

func TestMemoryExactUnderConcurrency(t *testing.T) {
	const threshold = 50
	l := ratelimit.NewMemory()
	req := ratelimit.Request{Name: "race", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: threshold}}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if d, _ := l.Allow(context.Background(), req); d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(threshold), admitted.Load())
}

func TestEveryRedisKeyHasTTL(t *testing.T) {
	l := newTestRedis(t)
	c := rdb(t)
	ctx := context.Background()
	for i := range 20 {
		_, err := l.Allow(ctx, ratelimit.Request{
			Name: "ttl", Key: fmt.Sprint(i % 4),
			Limits: []ratelimit.Limit{{Period: 30 * time.Second, Threshold: 3}, {Period: time.Second, Threshold: 2}},
		})
		require.NoError(t, err)
	}
	keys, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 8)
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, time.Duration(0), k)
		// Two periods plus a second past the newest entry: see lua/sliding_log.lua.tmpl.
		assert.LessOrEqual(t, ttl, 61*time.Second+time.Millisecond, k)
	}
}

func TestRedisKeysExpireWithTheirWindow(t *testing.T) {
	l := newTestRedis(t)
	c := rdb(t)
	req := ratelimit.Request{Name: "short", Limits: []ratelimit.Limit{{Period: 10 * time.Millisecond, Threshold: 3}}}
	_, err := l.Allow(context.Background(), req)
	require.NoError(t, err)
	// PTTL says -1 for a key without an expiry; -2, for a key gone, is a
	// key that expired already, when the machine took a second to ask.
	ttl := c.PTTL(context.Background(), l.Key("short", "", 0, ratelimit.SlidingLog)).Val()
	assert.NotEqual(t, time.Duration(-1), ttl, "the key expires")
	assert.LessOrEqual(t, ttl, 1020*time.Millisecond)

	// Once the window has passed, the next call trims the log and sets the TTL again.
	time.Sleep(15 * time.Millisecond)
	c.Persist(context.Background(), l.Key("short", "", 0, ratelimit.SlidingLog))
	_, err = l.Allow(context.Background(), req)
	require.NoError(t, err)
	ttl = c.PTTL(context.Background(), l.Key("short", "", 0, ratelimit.SlidingLog)).Val()
	assert.NotEqual(t, time.Duration(-1), ttl, "the key expires again")
}

func TestScriptFlushIsSurvived(t *testing.T) {
	l := newTestRedis(t)
	c := rdb(t)
	ctx := context.Background()
	lim := ratelimit.Limit{Period: time.Minute, Threshold: 2}
	one := ratelimit.Request{Name: "flush", Limits: []ratelimit.Limit{lim}}
	two := ratelimit.Request{Name: "flush2", Limits: []ratelimit.Limit{lim, lim}}
	require.True(t, allow(t, l, one).Allowed)
	require.True(t, allow(t, l, two).Allowed)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	single := planScript(planOf(lim))
	exists, err := c.ScriptExists(ctx, decideScript.Hash(), single.Hash()).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, exists, "the scripts must really be gone")
	for _, req := range []ratelimit.Request{one, two} {
		assert.True(t, allow(t, l, req).Allowed, "reloaded after NOSCRIPT")
		assert.False(t, allow(t, l, req).Allowed, "and the state was kept")
	}
}

func TestHostileKeysStayInTheirSlotAndNeverCollide(t *testing.T) {
	hostile := []string{"", "}", "{", "{}", "}{", "a}b", "x{y}z", ":", "::", "%", "%7B", "%25",
		"a:0", "a}:0", "\x00", "\n", "\r\n", "user\x7f", "ünï", strings.Repeat("{", 100)}
	seen := map[string]string{}
	for _, name := range []string{"svc.Get", "svc{x}.Get", "svc:Get"} {
		for _, key := range hostile {
			tags := map[string]bool{}
			for i := range 3 {
				k := storageKey(DefaultPrefix, name, callkey.Bound(key), i, ratelimit.SlidingLog)
				prev, dup := seen[k]
				require.False(t, dup, "%q collides with %s", k, prev)
				seen[k] = fmt.Sprintf("(%q, %q, %d)", name, key, i)
				tags[hashTag(k)] = true
				require.Equal(t, 1, strings.Count(k, "{"), k)
				require.Equal(t, 1, strings.Count(k, "}"), k)
			}
			require.Len(t, tags, 1, "all limits of one call share one hash tag")
		}
	}

	// And through the real server: hostile keys are limited separately.
	l := newTestRedis(t)
	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}
	for _, key := range hostile {
		assert.True(t, allow(t, l, ratelimit.Request{Name: "h", Key: key, Limits: lim}).Allowed, "%q", key)
	}
	n, err := rdb(t).DBSize(context.Background()).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(len(hostile)), n)
}

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the next '}', if non-empty, else the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

func TestRandomKeysNeverCollide(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	alphabet := []byte("ab{}:%0\x00")
	seen := map[string][2]string{}
	for range 20000 {
		name := randomString(rng, alphabet)
		key := randomString(rng, alphabet)
		k := storageKey("p:", name, callkey.Bound(key), 0, ratelimit.SlidingLog)
		if prev, ok := seen[k]; ok {
			require.Equal(t, prev, [2]string{name, key}, "collision on %q", k)
		}
		seen[k] = [2]string{name, key}
	}
}

func randomString(rng *rand.Rand, alphabet []byte) string {
	b := make([]byte, rng.IntN(5))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

func TestPrefixCannotMoveTheHashTag(t *testing.T) {
	l := New(nil, WithPrefix("app{1}:"))
	assert.Equal(t, "app1:{n:k}:0:log", l.Key("n", "k", 0, ratelimit.SlidingLog))
}

func TestRedisFailureIsTypedAndReported(t *testing.T) {
	c := newUnreachableClient(t)
	hook := &recordingHook{}
	l := New(c, ratelimit.WithHook(hook))
	_, err := l.Allow(context.Background(), ratelimit.Request{Name: "down", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1}}})
	require.Error(t, err)
	assert.ErrorIs(t, err, ratelimit.ErrBackend)
	var be *ratelimit.BackendError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "down", be.Name)
	assert.Contains(t, err.Error(), "connect")
	assert.Equal(t, 1, hook.failed)
	assert.Equal(t, 0, hook.decided)
}

func TestCancelledContextIsABackendError(t *testing.T) {
	l := newTestRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Allow(ctx, ratelimit.Request{Name: "ctx", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1}}})
	assert.ErrorIs(t, err, ratelimit.ErrBackend)
	assert.ErrorIs(t, err, context.Canceled)
}

type recordingHook struct {
	mu              sync.Mutex
	decided, failed int
	last            ratelimit.Decision
}

func (h *recordingHook) Decided(_ context.Context, _ *ratelimit.Request, d ratelimit.Decision) {
	h.mu.Lock()
	h.decided++
	h.last = d
	h.mu.Unlock()
}

func (h *recordingHook) Failed(context.Context, *ratelimit.Request, error) {
	h.mu.Lock()
	h.failed++
	h.mu.Unlock()
}

func TestHookSeesDecisions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		hook := &recordingHook{}
		l := newLimiter(ratelimit.WithHook(hook))
		req := ratelimit.Request{Name: "hook", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}}
		allow(t, l, req)
		allow(t, l, req)
		assert.Equal(t, 2, hook.decided)
		assert.False(t, hook.last.Allowed)
	})
}

func TestRuleCheckReportsLimitError(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		rule := &ratelimit.Rule{Name: "example.com/svc.Store.Get", Limits: []ratelimit.Limit{{Period: 30 * time.Second, Threshold: 2}}}
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, 1, "u1"))
		require.NoError(t, rule.Check(ctx, l, 1, "u1"))
		err := rule.Check(ctx, l, 1, "u1")
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		var le *ratelimit.LimitError
		require.True(t, errors.As(err, &le))
		assert.Equal(t, "example.com/svc.Store.Get", le.Name)
		assert.Equal(t, "u1", le.Key)
		assert.Equal(t, rule.Limits[0], le.Limit)
		assert.Equal(t, 30*time.Second, le.RetryAfter)
		assert.Equal(t, int64(0), le.Remaining)
		assert.Equal(t, `ratelimit: example.com/svc.Store.Get key "u1" exceeded 2 per 30s; retry after 30s`, le.Error())
		require.NoError(t, rule.Check(ctx, l, 1, "u2"), "another key has its own window")
	})
}

// TestAlgorithmChangeStartsAfresh is a release changing a limit's
// algorithm while its old state lives: each algorithm has keys of its own,
// so the new one starts with nothing charged and no WRONGTYPE.
func TestAlgorithmChangeStartsAfresh(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		for _, alg := range ratelimit.Algorithms() {
			req := ratelimit.Request{Name: "changing", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2, Algorithm: alg}}}
			assert.True(t, allow(t, l, req).Allowed, "%s: first call", alg)
			assert.True(t, allow(t, l, req).Allowed, "%s: second call", alg)
			assert.False(t, allow(t, l, req).Allowed, "%s: third call", alg)
		}
	})
}

// TestKeyOfAnotherTypeFailsTheCallAndChargesNothing writes a key of the
// wrong type where a limit's state lives: the call fails with a backend
// error naming WRONGTYPE, on the single-limit and the generic script, and
// the other limit of a two-limit call is left uncharged.
func TestKeyOfAnotherTypeFailsTheCallAndChargesNothing(t *testing.T) {
	ctx := context.Background()
	for _, alg := range ratelimit.Algorithms() {
		for _, generic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/generic=%v", alg, generic), func(t *testing.T) {
				var opts []Option
				if generic {
					opts = append(opts, withGenericScript())
				}
				l := newTestRedis(t, opts...)
				c := rdb(t)
				lim := ratelimit.Limit{Algorithm: alg, Period: time.Minute, Threshold: 1}
				require.NoError(t, c.SAdd(ctx, l.Key("typed", "", 0, alg), "x").Err())

				_, err := l.Allow(ctx, ratelimit.Request{Name: "typed", Limits: []ratelimit.Limit{lim}})
				var be *ratelimit.BackendError
				require.ErrorAs(t, err, &be)
				require.ErrorIs(t, err, ratelimit.ErrBackend)
				assert.ErrorContains(t, err, "WRONGTYPE")

				// Limit 0 of "typed2" is fine, limit 1 is of the wrong type.
				require.NoError(t, c.SAdd(ctx, l.Key("typed2", "", 1, alg), "x").Err())
				_, err = l.Allow(ctx, ratelimit.Request{Name: "typed2", Limits: []ratelimit.Limit{lim, lim}})
				require.ErrorContains(t, err, "WRONGTYPE")
				d := allow(t, l, ratelimit.Request{Name: "typed2", Limits: []ratelimit.Limit{lim}})
				assert.True(t, d.Allowed, "the failed call charged limit 0")
			})
		}
	}
}
