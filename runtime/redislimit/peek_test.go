package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

func peek(t *testing.T, l ratelimit.Limiter, req ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := ratelimit.Peek(context.Background(), l, req)
	require.NoError(t, err)
	return d
}

// TestPeekAgrees interleaves Peeks with the Allows of a random sequence of
// calls, for every set of limits of the differential test, on the memory
// limiter and on Redis (each limit's own script and the generic one). On
// a clock that only moves on, it wants every Allow to decide as on a
// limiter that is never peeked, and every Peek to say what that limiter's
// Allow of the same call says next; on the sets' own clocks (which step
// back) and algorithm changes, it wants the backends to agree on Peeks and
// Allows alike.
func TestPeekAgrees(t *testing.T) {
	for _, set := range agreeSets() {
		t.Run(set.name, func(t *testing.T) {
			var counts peekCounts
			for _, monotonic := range []bool{true, false} {
				untilCalm(t, stalledMsg, func() bool {
					c, calm := peekAgrees(t, set, monotonic)
					counts.add(c)
					return calm
				})
			}
			require.NotZero(t, counts.peeked)
			require.NotZero(t, counts.admitted, "some peek should admit")
			require.NotZero(t, counts.denied, "some peek should deny")
		})
	}
}

// peekCounts counts TestPeekAgrees's Peeks and how they decided.
type peekCounts struct{ peeked, admitted, denied int }

func (c *peekCounts) add(d peekCounts) {
	c.peeked, c.admitted, c.denied = c.peeked+d.peeked, c.admitted+d.admitted, c.denied+d.denied
}

// peekAgrees runs TestPeekAgrees's sequence of set on fresh keys, and
// returns its counts, and false if it stalled in real time (see
// realTimeGuard) before it ended, having checked every call before the
// stall.
func peekAgrees(t *testing.T, set agreeSet, monotonic bool) (counts peekCounts, calm bool) {
	rng := rand.New(rand.NewPCG(7, uint64(len(set.name))))
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	red := newTestRedis(t, ratelimit.WithClock(clock))
	gen := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("generic:"), withGenericScript(), WithDenyCache(0), withoutHeartbeat())
	ref := ratelimit.NewMemory(ratelimit.WithClock(clock))
	guard := newRealTimeGuard(clock, set.all()...)
	for i := range 300 {
		limits := set.limits
		if monotonic {
			clock.Advance(max(0, randomAdvance(rng)))
		} else {
			limits = set.step(rng, clock, i, 300)
		}
		req := set.request(rng, limits)
		at := clock.Now().Format(time.StampMicro)
		guard.start()
		if rng.IntN(2) == 0 {
			p, pr, pg := peek(t, mem, req), peek(t, red, req), peek(t, gen, req)
			if guard.stalled() {
				return peekCounts{}, false
			}
			require.Equal(t, p, pr, "peek %d at %s: %+v", i, at, req)
			require.Equal(t, p, pg, "generic peek %d at %s: %+v", i, at, req)
			counts.peeked++
			if monotonic {
				require.Equal(t, p, peek(t, ref, req), "peek %d at %s: %+v", i, at, req)
			}
			if p.Allowed {
				counts.admitted++
			} else {
				counts.denied++
			}
			if rng.IntN(3) == 0 {
				continue // a Peek alone
			}
		}
		d, dr, dg := allow(t, mem, req), allow(t, red, req), allow(t, gen, req)
		if guard.stalled() {
			return peekCounts{}, false
		}
		require.Equal(t, d, dr, "call %d at %s: %+v", i, at, req)
		require.Equal(t, d, dg, "generic call %d at %s: %+v", i, at, req)
		if monotonic {
			want := allow(t, ref, req)
			require.Equal(t, want, d, "call %d after peeks at %s: %+v", i, at, req)
		}
	}
	return counts, true
}

// TestPeekRemaining checks Peek's numbers on every algorithm and backend:
// after 2 of 3 units, a Peek of 1 admits with 1 remaining, one of 2 is
// denied with the RetryAfter Allow gives, and neither charges.
func TestPeekRemaining(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		for _, alg := range ratelimit.Algorithms() {
			t.Run(string(alg), func(t *testing.T) {
				clock := newManualClock()
				l := newLimiter(ratelimit.WithClock(clock))
				req := ratelimit.Request{Name: "peek-" + string(alg), Key: "k", Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Minute, Threshold: 3}}}
				for range 3 {
					p := peek(t, l, req)
					require.True(t, p.Allowed)
					require.Equal(t, int64(3), p.Remaining)
				}
				allow(t, l, req)
				allow(t, l, req)
				for range 2 {
					p := peek(t, l, req)
					require.True(t, p.Allowed, "%+v", p)
					require.Equal(t, int64(1), p.Remaining)
					two := req
					two.Cost = 2
					p = peek(t, l, two)
					require.False(t, p.Allowed)
					require.Equal(t, int64(1), p.Remaining)
					require.Positive(t, p.RetryAfter)
					d := allow(t, l, two)
					require.Equal(t, d, p, "a denied Peek is the denial")
				}
				require.True(t, allow(t, l, req).Allowed)
				p := peek(t, l, req)
				require.False(t, p.Allowed)
				require.Zero(t, p.Remaining)
			})
		}
	})
}

// TestReset fills every limit of a multi-limit request and of a request of
// MaxLimits limits, on every backend, and wants Reset to let the next
// call start afresh, leaving other keys and names alone.
func TestReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter()
		var all []ratelimit.Limit
		for i := range ratelimit.MaxLimits {
			all = append(all, ratelimit.Limit{Algorithm: ratelimit.Algorithms()[i%len(ratelimit.Algorithms())], Period: time.Hour, Threshold: 2})
		}
		long := strings.Repeat("long key ", 20)
		for _, limits := range append(mixedLimits(), all) {
			for _, key := range []string{"a", long} {
				req := ratelimit.Request{Name: "reset", Key: key, Cost: 2, Limits: limits}
				other := ratelimit.Request{Name: "reset", Key: "other", Cost: 2, Limits: limits}
				otherName := ratelimit.Request{Name: "reset2", Key: key, Cost: 2, Limits: limits}
				for _, r := range []ratelimit.Request{req, other, otherName} {
					require.True(t, allow(t, l, r).Allowed)
					require.False(t, allow(t, l, r).Allowed)
				}
				require.NoError(t, resetKey(context.Background(), l, "reset", key))
				require.True(t, peek(t, l, req).Allowed)
				require.True(t, allow(t, l, req).Allowed)
				require.False(t, allow(t, l, other).Allowed, "another key")
				require.False(t, allow(t, l, otherName).Allowed, "another name")
				for _, r := range []ratelimit.Request{req, other, otherName} {
					require.NoError(t, resetKey(context.Background(), l, r.Name, r.Key))
				}
			}
		}
		if r, ok := l.(*Limiter); ok {
			n, err := r.client.DBSize(context.Background()).Result()
			require.NoError(t, err)
			require.Zero(t, n, "Reset leaves no key")
		}
	})
}

// TestResetForgetsTheFallback fills a limit in the Redis limiter's local
// fallback (FailLocal) and wants Reset to forget it too.
func TestResetForgetsTheFallback(t *testing.T) {
	l := newTestRedis(t)
	req := ratelimit.Request{Name: "fallback", Key: "k", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
	d, _, err := l.AllowLocal(context.Background(), req)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, _, _ = l.AllowLocal(context.Background(), req)
	require.False(t, d.Allowed)
	require.NoError(t, l.Reset(context.Background(), req.Name, req.Key))
	d, _, _ = l.AllowLocal(context.Background(), req)
	require.True(t, d.Allowed)
}

// TestPeekErrors: invalid requests, too many limits, a dead server, and a
// limiter that cannot peek.
func TestPeekErrors(t *testing.T) {
	ctx := context.Background()
	lim := ratelimit.Limit{Period: time.Second, Threshold: 1}
	tooMany := make([]ratelimit.Limit, ratelimit.MaxLimits+1)
	for i := range tooMany {
		tooMany[i] = lim
	}
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter()
		for _, req := range []ratelimit.Request{{Limits: []ratelimit.Limit{lim}}, {Name: "n"}, {Name: "n", Limits: tooMany}, {Name: "n", Cost: 2, Limits: []ratelimit.Limit{lim}}} {
			_, err := ratelimit.Peek(ctx, l, req)
			require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
			_, err = l.Allow(ctx, req)
			require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
		}
	})
	dead := New(newUnreachableClient(t))
	_, err := dead.Peek(ctx, ratelimit.Request{Name: "n", Limits: []ratelimit.Limit{lim}})
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	require.ErrorIs(t, dead.Reset(ctx, "n", "k"), ratelimit.ErrBackend)

	plain := failingLimiter{} // a limiter that peeks at nothing
	_, err = ratelimit.Peek(ctx, plain, ratelimit.Request{})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.ErrorIs(t, (&ratelimit.Rule{Name: "n"}).Reset(ctx, plain, "k"), errors.ErrUnsupported)
}

// TestPeekThroughWrappers reaches Peek and Reset through two wrappers.
func TestPeekThroughWrappers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		inner := newLimiter()
		l := wrapped{wrapped{inner}}
		req := ratelimit.Request{Name: "wrapped", Key: "k", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
		require.True(t, allow(t, l, req).Allowed)
		require.False(t, peek(t, l, req).Allowed)
		require.NoError(t, resetKey(context.Background(), l, req.Name, req.Key))
		require.True(t, peek(t, inner, req).Allowed)
	})
}

// peekAndReset: on the cluster, Peek and Reset of every algorithm alone
// (3 per hour) and mixed with SlidingLog (2 per second first).
func (ct *clusterTest) peekAndReset(t *testing.T) {
	l, _ := ct.limiter(t, ratelimit.WithClock(newManualClock()))
	cases := [][]ratelimit.Limit{}
	for _, alg := range clusterAlgorithms() {
		cases = append(cases, []ratelimit.Limit{{Period: time.Hour, Threshold: 3, Algorithm: alg}})
	}
	cases = append(cases, mixedLimits()...)
	for i, limits := range cases {
		for _, key := range []string{"a", "b", "c"} {
			req := ratelimit.Request{Name: "cluster-peek", Key: fmt.Sprint(key, i), Limits: limits}
			fresh := limits[0].Threshold
			require.True(t, allow(t, l, req).Allowed)
			require.True(t, allow(t, l, req).Allowed)
			p := peek(t, l, req)
			require.Equal(t, fresh == 3, p.Allowed, "%+v: %+v", limits, p)
			require.Equal(t, fresh-2, p.Remaining)
			require.Equal(t, p, peek(t, l, req))
			require.NoError(t, l.Reset(context.Background(), req.Name, req.Key))
			p = peek(t, l, req)
			require.True(t, p.Allowed)
			require.Equal(t, fresh, p.Remaining)
		}
	}
}

// BenchmarkRedisPeekVsPing interleaves PING, Allow, Peek and Reset on one
// connection and reports each one's median latency as a ratio to PING's,
// per algorithm, on a limit that admits every call.
func BenchmarkRedisPeekVsPing(b *testing.B) {
	for _, alg := range ratelimit.Algorithms() {
		b.Run(string(alg), func(b *testing.B) {
			srv.Flush(b)
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
			defer c.Close()
			ctx := context.Background()
			l := New(c)
			req := benchRequest("user-42")
			req.Limits[0].Algorithm = alg
			var ping, allowed, peeked, reset []time.Duration
			step := func(into *[]time.Duration, f func() error) {
				t0 := time.Now()
				if err := f(); err != nil {
					b.Fatal(err)
				}
				*into = append(*into, time.Since(t0))
			}
			for b.Loop() {
				step(&ping, func() error { return c.Ping(ctx).Err() })
				step(&allowed, func() error { _, err := l.Allow(ctx, req); return err })
				step(&peeked, func() error { _, err := l.Peek(ctx, req); return err })
				if len(reset) < len(ping)/16 { // not on every step: the state builds up
					step(&reset, func() error { return l.Reset(ctx, req.Name, req.Key) })
				}
			}
			p := float64(median(ping))
			b.ReportMetric(p, "ping-ns")
			b.ReportMetric(float64(median(allowed))/p, "allow/ping")
			b.ReportMetric(float64(median(peeked))/p, "peek/ping")
			if len(reset) > 0 {
				b.ReportMetric(float64(median(reset))/p, "reset/ping")
			}
		})
	}
}

// TestResetAndTheDenyCache: a Reset forgets the denials its own process's
// deny cache remembers, so the next call is asked of Redis and admitted;
// another process's cache keeps repeating its denial, as documented.
func TestResetAndTheDenyCache(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	l, other := New(rdb(t)), New(rdb(t)) // two processes, deny caches on
	req := ratelimit.Request{Name: "cached", Key: "k", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
	require.True(t, allow(t, l, req).Allowed)
	for _, p := range []*Limiter{l, other} {
		require.False(t, allow(t, p, req).Allowed)
		d := allow(t, p, req)
		require.False(t, d.Allowed)
		require.Equal(t, ratelimit.SourceCache, d.Source, "the denial is remembered")
	}
	require.NoError(t, l.Reset(ctx, req.Name, req.Key))
	d := allow(t, l, req)
	require.True(t, d.Allowed, "%+v", d)
	require.Equal(t, ratelimit.SourceBackend, d.Source)
	d = allow(t, other, req)
	require.False(t, d.Allowed)
	require.Equal(t, ratelimit.SourceCache, d.Source, "another process keeps its remembered denial")
	require.Positive(t, d.RetryAfter)
}

// hookRecorder records the requests its hook is told of.
type hookRecorder struct {
	mu   sync.Mutex
	reqs []ratelimit.Request
}

func (h *hookRecorder) Decided(_ context.Context, req *ratelimit.Request, _ ratelimit.Decision) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reqs = append(h.reqs, *req)
}

func (h *hookRecorder) Failed(context.Context, *ratelimit.Request, error) {}

// TestHooksSeeRequestsAsBuilt: the hook of a Redis limiter sees a Rule's
// request as Rule.Check builds it, its rule included (for
// Request.RedactedKey), as the memory limiter's does (ratelimit's
// TestRuleValidatesItsLimitsOnce).
func TestHooksSeeRequestsAsBuilt(t *testing.T) {
	hook := &hookRecorder{}
	l := newTestRedis(t, ratelimit.WithHook(hook))
	rule := &ratelimit.Rule{Name: "built", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3}}}
	require.NoError(t, rule.Check(context.Background(), l, 2, "k"))
	assert.Equal(t, []ratelimit.Request{{Name: "built", Key: "k", Cost: 2, Limits: rule.Limits, Rule: rule}}, hook.reqs)
}

// resetKey clears the state of name and key on l (OpReset).
func resetKey(ctx context.Context, l ratelimit.Limiter, name, key string) error {
	_, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpReset, Request: ratelimit.Request{Name: name, Key: key}})
	return err
}
