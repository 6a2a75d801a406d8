package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// pauseRedis makes the test server hold every client's scripts (CLIENT
// PAUSE WRITE, which lets CLIENT UNPAUSE through) until the returned
// resume is called or the test ends, so that a batch stays in flight while
// the test queues calls behind it, however long a slow machine takes to.
// The limiter's client must wait that long: see patientRedis.
func pauseRedis(t *testing.T) (resume func()) {
	t.Helper()
	ctx := context.Background()
	c := rdb(t)
	require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", pauseLimit.Milliseconds(), "WRITE").Err())
	var once sync.Once
	resume = func() {
		once.Do(func() { require.NoError(t, c.Do(ctx, "CLIENT", "UNPAUSE").Err()) })
	}
	t.Cleanup(resume)
	return resume
}

// pauseLimit bounds a pause of pauseRedis that the test never resumes.
const pauseLimit = time.Minute

// patientRedis returns a Limiter like newTestRedis whose client
// waits for replies through a pause of pauseRedis.
func patientRedis(t *testing.T, opts ...Option) *Limiter {
	srv.Flush(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 2 * pauseLimit})
	t.Cleanup(func() { c.Close() })
	return New(c, opts...)
}

// noLinger makes the queued calls of l wait for the batch in flight
// however long it takes, so that a test decides when batches go.
func noLinger(l *Limiter) *Limiter {
	l.batcher.after = func(time.Duration) <-chan time.Time { return nil }
	return l
}

// queued returns how many calls wait in l's batching queue.
func queued(l *Limiter) int {
	l.batcher.mu.Lock()
	defer l.batcher.mu.Unlock()
	return len(l.batcher.queue)
}

// inFlight reports whether a batch of l is on its way with nobody queued.
func inFlight(l *Limiter) bool {
	l.batcher.mu.Lock()
	defer l.batcher.mu.Unlock()
	return l.batcher.busy && len(l.batcher.queue) == 0
}

// batchScriptRan reports whether the server has a batch script loaded, as
// the first batch of more than one call does after SCRIPT FLUSH: the
// generic one or the one written for any of the limits.
func batchScriptRan(t *testing.T, limits ...ratelimit.Limit) bool {
	hashes := []string{batchScript.Hash()}
	for _, lim := range limits {
		hashes = append(hashes, planBatchScript(planOf(lim)).Hash())
	}
	ok, err := rdb(t).ScriptExists(context.Background(), hashes...).Result()
	require.NoError(t, err)
	return slices.Contains(ok, true)
}

// scriptLoaded reports whether the server has s in its script cache.
func scriptLoaded(t *testing.T, s *redis.Script) bool {
	ok, err := rdb(t).ScriptExists(context.Background(), s.Hash()).Result()
	require.NoError(t, err)
	return ok[0]
}

func flushScripts(t *testing.T) {
	require.NoError(t, rdb(t).ScriptFlush(context.Background()).Err())
}

// TestBatchingIsExactUnderConcurrency decides 320 calls from 64 goroutines
// against a limit of 50 on a frozen clock, through two batched limiters on
// two clients: exactly 50 are admitted, in batches, by the script written
// for the limit and by the generic one.
func TestBatchingIsExactUnderConcurrency(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		for _, generic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/generic=%v", alg, generic), func(t *testing.T) {
				clock := newManualClock()
				srv.Flush(t)
				flushScripts(t)
				ls := []ratelimit.Limiter{New(rdb(t), ratelimit.WithClock(clock), WithBatching(16)), New(rdb(t), ratelimit.WithClock(clock), WithBatching(16))}
				req := ratelimit.Request{Name: "race", Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 50}}}
				if generic {
					ls = []ratelimit.Limiter{
						newTest(rdb(t), ratelimit.WithClock(clock), WithBatching(16), withGenericScript()),
						newTest(rdb(t), ratelimit.WithClock(clock), WithBatching(16), withGenericScript()),
					}
				}
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range 64 {
					wg.Go(func() {
						for range 5 {
							d, err := ls[g%2].Allow(context.Background(), req)
							if assert.NoError(t, err) && d.Allowed {
								admitted.Add(1)
							}
						}
					})
				}
				wg.Wait()
				assert.Equal(t, int64(50), admitted.Load())
				own := planBatchScript(planOf(req.Limits[0]))
				assert.Equal(t, !generic, scriptLoaded(t, own), "batches of the limit's own script")
				assert.Equal(t, generic, scriptLoaded(t, batchScript), "batches of the generic script")
			})
		}
	}
}

// TestBatchedKeysAreExact decides many keys of every algorithm from 64
// goroutines, on the server's clock, in batches mixing keys: each key
// admits exactly its threshold.
func TestBatchedKeysAreExact(t *testing.T) {
	srv.Flush(t)
	flushScripts(t)
	l := New(rdb(t), WithBatching(32))
	const keys, threshold, calls = 12, 7, 20
	type key struct {
		alg ratelimit.Algorithm
		k   int
	}
	var mu sync.Mutex
	admitted := map[key]int{}
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range calls * keys * len(ratelimit.Algorithms()) / 64 {
				n := g*calls + i
				k := key{ratelimit.Algorithms()[n%len(ratelimit.Algorithms())], n / len(ratelimit.Algorithms()) % keys}
				req := ratelimit.Request{Name: "keys", Key: fmt.Sprint(k.k), Limits: []ratelimit.Limit{{Algorithm: k.alg, Period: time.Hour, Threshold: threshold}}}
				d, err := l.Allow(context.Background(), req)
				if assert.NoError(t, err) && d.Allowed {
					mu.Lock()
					admitted[k]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, alg := range ratelimit.Algorithms() {
		for k := range keys {
			assert.Equal(t, threshold, admitted[key{alg, k}], "%s key %d", alg, k)
		}
	}
	var limits []ratelimit.Limit
	for _, alg := range ratelimit.Algorithms() {
		limits = append(limits, ratelimit.Limit{Algorithm: alg, Period: time.Hour, Threshold: threshold})
	}
	assert.True(t, batchScriptRan(t, limits...), "no batch of more than one call was sent")
}

// TestBatchedBackendsAgree is TestBackendsAgree with batching: the same
// random calls go to the memory limiter one by one and to Redis in
// batches of one to six calls (often of the same key) decided by one run
// of the batch script, or alone through Allow; every decision agrees.
func TestBatchedBackendsAgree(t *testing.T) {
	for _, set := range agreeSets() {
		for _, generic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/generic=%v", set.name, generic), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, uint64(len(set.name))))
				clock := newManualClock()
				mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
				opts := []Option{ratelimit.WithClock(clock), WithBatching(8)}
				if generic {
					opts = append(opts, withGenericScript())
				}
				red := newTestRedis(t, opts...)
				admitted, denied := 0, 0
				for i := range 150 {
					limits := set.step(rng, clock, i, 150)
					calls := make([]*batchCall, 1+rng.IntN(6))
					for j := range calls {
						req := set.request(rng, limits)
						calls[j] = &batchCall{req: &req}
					}
					if len(calls) == 1 {
						calls[0].d, calls[0].err = red.Allow(context.Background(), *calls[0].req)
					} else {
						red.decideBatch(context.Background(), calls)
					}
					for j, c := range calls {
						require.NoError(t, c.err)
						dm := allow(t, mem, *c.req)
						require.Equal(t, dm, c.d, "call %d.%d at %s: %+v", i, j, clock.Now().Format(time.StampMicro), *c.req)
						if dm.Allowed {
							admitted++
						} else {
							denied++
						}
					}
				}
				require.NotZero(t, admitted)
				require.NotZero(t, denied, "the sequence should reach the limit")
			})
		}
	}
}

// batchHook records the calls it is told about.
type batchHook struct {
	mu      sync.Mutex
	decided []string
	failed  map[string]error
}

func (h *batchHook) Decided(_ context.Context, req *ratelimit.Request, _ ratelimit.Decision) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.decided = append(h.decided, req.Key)
}

func (h *batchHook) Failed(_ context.Context, req *ratelimit.Request, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed == nil {
		h.failed = map[string]error{}
	}
	h.failed[req.Key] = err
}

// TestBatchedWrongTypeFailsOnlyItsCall queues eight calls behind a batch
// in flight, so that they are decided in one batch, one of them on a key
// of the wrong type: that call fails with ErrBackend (and is reported to
// the hook as failed), the others are decided and charged.
func TestBatchedWrongTypeFailsOnlyItsCall(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			hook := &batchHook{}
			l := noLinger(patientRedis(t, WithBatching(16), ratelimit.WithHook(hook)))
			lim := []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 1}}
			ctx := context.Background()
			require.NoError(t, rdb(t).Set(ctx, l.Key("wt", "bad", 0, alg), "x", 0).Err())
			if alg != ratelimit.SlidingLog {
				// A string is the type of the buckets and the windows:
				// give them a list.
				require.NoError(t, rdb(t).Del(ctx, l.Key("wt", "bad", 0, alg)).Err())
				require.NoError(t, rdb(t).RPush(ctx, l.Key("wt", "bad", 0, alg), "x").Err())
			}

			resume := pauseRedis(t)
			errs := make(map[string]error)
			var mu sync.Mutex
			var wg sync.WaitGroup
			call := func(key string) {
				wg.Go(func() {
					_, err := l.Allow(ctx, ratelimit.Request{Name: "wt", Key: key, Limits: lim})
					mu.Lock()
					errs[key] = err
					mu.Unlock()
				})
			}
			call("leader")
			require.Eventually(t, func() bool { return inFlight(l) }, time.Minute, time.Millisecond)
			keys := []string{"a", "b", "c", "bad", "d", "e", "f", "g"}
			for _, k := range keys {
				call(k)
			}
			require.Eventually(t, func() bool { return queued(l) == len(keys) }, time.Minute, time.Millisecond)
			resume()
			wg.Wait()

			for _, k := range append(keys, "leader") {
				if k == "bad" {
					require.ErrorIs(t, errs[k], ratelimit.ErrBackend)
					var be *ratelimit.BackendError
					require.ErrorAs(t, errs[k], &be)
					require.ErrorContains(t, be.Err, "WRONGTYPE")
					require.Equal(t, errs[k], hook.failed[k])
					continue
				}
				require.NoError(t, errs[k], k)
				d, err := l.Allow(ctx, ratelimit.Request{Name: "wt", Key: k, Limits: lim})
				require.NoError(t, err)
				require.False(t, d.Allowed, "%s was not charged", k)
			}
			require.Len(t, hook.failed, 1)
			require.Len(t, hook.decided, 2*len(keys))
		})
	}
}

// TestBatchedCallCancelledWhileQueued cancels a call queued behind a batch
// in flight: it returns at once with a BackendError wrapping
// context.Canceled, uncharged, and the call queued after it is decided.
func TestBatchedCallCancelledWhileQueued(t *testing.T) {
	hook := &batchHook{}
	l := noLinger(patientRedis(t, WithBatching(8), ratelimit.WithHook(hook)))
	req := func(key string) ratelimit.Request {
		return ratelimit.Request{Name: "cancel", Key: key, Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
	}
	resume := pauseRedis(t)
	var wg sync.WaitGroup
	var leaderErr, afterErr error
	wg.Go(func() { _, leaderErr = l.Allow(context.Background(), req("leader")) })
	require.Eventually(t, func() bool { return inFlight(l) }, time.Minute, time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(ctx, req("cancelled"))
		done <- err
	}()
	require.Eventually(t, func() bool { return queued(l) == 1 }, time.Minute, time.Millisecond)
	wg.Go(func() { _, afterErr = l.Allow(context.Background(), req("after")) })
	require.Eventually(t, func() bool { return queued(l) == 2 }, time.Minute, time.Millisecond)

	cancel()
	err := <-done
	// Redis is paused until resumed: the batch in flight is not back, and
	// the call queued after the cancelled one still waits for it.
	require.Equal(t, 1, queued(l), "the cancelled call waited for the batch in flight")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	var be *ratelimit.BackendError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "cancel", be.Name)
	require.Equal(t, 1, queued(l))

	resume()
	wg.Wait()
	require.NoError(t, leaderErr)
	require.NoError(t, afterErr)
	require.Equal(t, err, hook.failed["cancelled"])
	d := allow(t, l, req("cancelled"))
	require.True(t, d.Allowed, "the cancelled call was charged")
}

// TestBatcherAbandonedLeaderHandsOn: a call made the leader whose context
// ends before it sends its batch passes the leadership to the next queued
// call, or leaves nobody leading.
func TestBatcherAbandonedLeaderHandsOn(t *testing.T) {
	b := &batcher{max: 8}
	first := &batchCall{state: callLeading, wake: make(chan struct{}, 1)}
	second := &batchCall{state: callQueued, wake: make(chan struct{}, 1)}
	third := &batchCall{state: callQueued, wake: make(chan struct{}, 1)}
	b.queue, b.busy = []*batchCall{second, third}, true // a leader leaves the queue

	require.True(t, b.abandon(first))
	require.Equal(t, []*batchCall{third}, b.queue)
	require.Equal(t, callLeading, second.state)
	require.Len(t, second.wake, 1)
	require.True(t, b.busy)

	require.True(t, b.abandon(third), "a queued call leaves the queue")
	require.Empty(t, b.queue)
	require.Equal(t, callLeading, second.state)
	require.True(t, b.busy)

	require.True(t, b.abandon(second))
	require.Empty(t, b.queue)
	require.False(t, b.busy)

	done := &batchCall{state: callDone}
	require.False(t, b.abandon(done), "a decided call keeps its decision")
}

// TestBatchedFailureFailsEveryCallAlike: a batch Redis cannot run fails
// each of its calls with the same cause.
func TestBatchedFailureFailsEveryCallAlike(t *testing.T) {
	l := New(newUnreachableClient(t), WithBatching(8))
	var calls []*batchCall
	for k := range 3 {
		calls = append(calls, &batchCall{req: &ratelimit.Request{Name: "down", Key: fmt.Sprint(k), Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1}}}})
	}
	l.decideBatch(context.Background(), calls)
	require.Error(t, calls[0].err)
	require.True(t, redisUnavailable(calls[0].err))
	for _, c := range calls {
		require.Same(t, calls[0].err, c.err)
	}

	hook := &batchHook{}
	l = New(newUnreachableClient(t), WithBatching(8), ratelimit.WithHook(hook), WithBreaker(0, 0, 0))
	var wg sync.WaitGroup
	for k := range 16 {
		wg.Go(func() {
			_, err := l.Allow(context.Background(), ratelimit.Request{Name: "down", Key: fmt.Sprint(k), Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1}}})
			var be *ratelimit.BackendError
			if assert.ErrorAs(t, err, &be) {
				assert.True(t, redisUnavailable(be.Err))
			}
		})
	}
	wg.Wait()
	require.Len(t, hook.failed, 16)
}

// TestWithBatchingOnlyOnOneServer: batching is on by default, off below
// two, and off for a Cluster or Ring client, whose keys live on several
// nodes.
func TestWithBatchingOnlyOnOneServer(t *testing.T) {
	c := rdb(t)
	require.NotNil(t, New(c).batcher)
	require.Equal(t, DefaultBatch, New(c).batcher.max)
	require.Equal(t, 500*time.Millisecond, New(c).batcher.linger, "a tenth of the default ReadTimeout")
	require.Nil(t, New(c, WithBatching(1)).batcher)
	require.NotNil(t, New(c, WithBatching(2)).batcher)

	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { cluster.Close() })
	require.Nil(t, New(cluster, WithBatching(64)).batcher)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { ring.Close() })
	require.Nil(t, New(ring, WithBatching(64)).batcher)
}

// TestBatchScriptSurvivesScriptFlush: after SCRIPT FLUSH the batch script
// is loaded again (EVALSHA's NOSCRIPT falls back to EVAL).
func TestBatchScriptSurvivesScriptFlush(t *testing.T) {
	l := newTestRedis(t, WithBatching(8))
	flushScripts(t)
	calls := []*batchCall{
		{req: &ratelimit.Request{Name: "flush", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1}}}},
		{req: &ratelimit.Request{Name: "flush", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1}}}},
	}
	l.decideBatch(context.Background(), calls)
	require.NoError(t, calls[0].err)
	require.NoError(t, calls[1].err)
	require.True(t, calls[0].d.Allowed)
	require.False(t, calls[1].d.Allowed)
}

// TestBatcherCostsACallAloneNothing: a call that finds nothing in flight
// goes at once, with no more allocations than with batching off. The
// limiters stay out of the heartbeat, whose beats would allocate beside
// the calls, and fewestAllocs discounts what other goroutines allocate.
func TestBatcherCostsACallAloneNothing(t *testing.T) {
	c := rdb(t)
	ctx := context.Background()
	req := ratelimit.Request{Name: "alone", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1 << 40}}}
	batched, plain := newTest(c, withoutHeartbeat()), newTest(c, WithBatching(0), withoutHeartbeat())
	require.NotNil(t, batched.batcher)
	allocs := func(l *Limiter) float64 {
		return fewestAllocs(func() {
			d, err := l.Allow(ctx, req)
			if err != nil || !d.Allowed {
				t.Fatal(d, err)
			}
		})
	}
	assert.Equal(t, allocs(plain), allocs(batched))
}

// TestBatchedCallWaitsForOneRoundTrip stalls Redis with a call in flight
// and two calls queued behind it: when the first queued call has waited
// its linger, it sends both in a batch of their own while the first call
// is still in flight, instead of waiting for it, and every call is
// decided once, exactly as the in-process twin decides them.
func TestBatchedCallWaitsForOneRoundTrip(t *testing.T) {
	l := patientRedis(t, WithBatching(8))
	lingers := make(chan chan time.Time, 2)
	l.batcher.after = func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		lingers <- c
		return c
	}
	lim := []ratelimit.Limit{{Period: time.Hour, Threshold: 2}}
	req := ratelimit.Request{Name: "linger", Key: "k", Limits: lim}
	ctx := context.Background()
	resume := pauseRedis(t)

	type result struct {
		d   ratelimit.Decision
		err error
	}
	first := make(chan result, 1)
	go func() {
		d, err := l.Allow(ctx, req)
		first <- result{d, err}
	}()
	require.Eventually(t, func() bool { return inFlight(l) }, 10*time.Second, time.Millisecond)
	queuedResults := make(chan result, 2)
	for range 2 {
		go func() {
			d, err := l.Allow(ctx, req)
			queuedResults <- result{d, err}
		}()
	}
	linger := <-lingers
	<-lingers
	require.Eventually(t, func() bool { return queued(l) == 2 }, 10*time.Second, time.Millisecond)

	linger <- time.Time{}
	require.Eventually(t, func() bool { return queued(l) == 0 }, 10*time.Second, time.Millisecond, "the lingering call sent no batch")
	select {
	case <-first:
		t.Fatal("Redis answered while paused") // so the batch went after the call in flight
	default:
	}

	// Redis wakes: three calls against a threshold of two.
	resume()
	var admitted int
	for _, r := range []result{<-first, <-queuedResults, <-queuedResults} {
		require.NoError(t, r.err)
		if r.d.Allowed {
			admitted++
		}
	}
	twin := ratelimit.NewMemory()
	var twinAdmitted int
	for range 3 {
		if allow(t, twin, req).Allowed {
			twinAdmitted++
		}
	}
	assert.Equal(t, twinAdmitted, admitted)
	assert.False(t, allow(t, l, req).Allowed, "no call was charged twice or lost")
}
