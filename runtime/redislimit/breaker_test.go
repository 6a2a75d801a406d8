package redislimit

import (
	"context"
	"errors"
	"fmt"
	"net"
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

var breakerReq = ratelimit.Request{Name: "breaker", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 100}}}

// failFastClient returns a client of addr that tries each command once.
func failFastClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		MaxRetries:    -1,
		DialerRetries: 1,
		DialTimeout:   200 * time.Millisecond,
		ReadTimeout:   200 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// stoppedAddr returns the address of a real redis-server that was stopped.
func stoppedAddr(t testing.TB) string {
	s, err := redistest.Start()
	require.NoError(t, err)
	s.Stop()
	return s.Addr
}

// breakerEvents is a BreakerHook that records what it is told.
type breakerEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *breakerEvents) BreakerOpened(node string, err error) {
	e.add(fmt.Sprintf("opened %s: %v", node, err))
}

func (e *breakerEvents) BreakerClosed(node string, open time.Duration) {
	e.add(fmt.Sprintf("closed %s after %v", node, open))
}

func (e *breakerEvents) add(ev string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

func (e *breakerEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

// replyErr is an error reply of Redis, as the client returns it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

var _ redis.Error = replyErr("")

// assertNoProbe waits, under a generous deadline, until no probe of l's
// breakers runs: a probe ends when its breaker closes or its client is
// closed.
func assertNoProbe(t *testing.T, l *Limiter) {
	t.Helper()
	require.Eventually(t, func() bool { return !l.breakers.Probing() }, time.Minute, 10*time.Millisecond, "the breaker's probe goroutine is left")
}

func TestBreakerOffWithZeroFailures(t *testing.T) {
	l := New(failFastClient(t, stoppedAddr(t)), WithBreaker(0, 0, 0))
	for range 10 {
		_, err := l.Allow(context.Background(), breakerReq)
		require.ErrorIs(t, err, ratelimit.ErrBackend)
		require.NotErrorIs(t, err, ratelimit.ErrCircuitOpen)
	}
	assert.False(t, l.CircuitOpen())
}

func TestBreakerOpensAndRecoversWithARealServer(t *testing.T) {
	addr := stoppedAddr(t)
	metrics := &limitmetrics.Metrics{}
	l := New(failFastClient(t, addr), WithBreaker(3, 50*time.Millisecond, time.Second), ratelimit.WithHook(metrics))
	ctx := context.Background()
	for i := range 3 {
		_, err := l.Allow(ctx, breakerReq)
		require.ErrorIs(t, err, ratelimit.ErrBackend)
		require.NotErrorIs(t, err, ratelimit.ErrCircuitOpen, "call %d reached for Redis", i)
	}
	require.True(t, l.CircuitOpen())
	_, err := l.Allow(ctx, breakerReq)
	require.ErrorIs(t, err, ratelimit.ErrCircuitOpen)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	var be *ratelimit.BackendError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "breaker", be.Name)
	assert.Equal(t, uint64(4), metrics.Snapshot()["breaker"].BackendErrors, "open-circuit failures are reported too")

	// The policies apply at once.
	closed := &ratelimit.Rule{Name: "breaker", Limits: breakerReq.Limits, OnError: ratelimit.FailClosed}
	assert.ErrorIs(t, closed.Check(ctx, l, 1, ""), ratelimit.ErrCircuitOpen)
	open := &ratelimit.Rule{Name: "breaker", Limits: breakerReq.Limits, OnError: ratelimit.FailOpen}
	assert.NoError(t, open.Check(ctx, l, 1, ""))

	// A server comes up where the client looks: the background probe
	// finds it and the breaker closes.
	s, err := redistest.StartOn(addr)
	require.NoError(t, err)
	defer s.Stop()
	require.Eventually(t, func() bool {
		d, err := l.Allow(ctx, breakerReq)
		return err == nil && d.Allowed
	}, time.Minute, 10*time.Millisecond)
	assert.False(t, l.CircuitOpen())
	d, err := l.Allow(ctx, breakerReq)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assertNoProbe(t, l)
}

// testListener accepts connections on loopback and counts them. It closes
// each at once (a Redis that is there but broken) or, with hold, keeps it
// open and never answers (a Redis that hangs), until the test ends.
type testListener struct {
	net.Listener
	accepted atomic.Int64
}

func newTestListener(t testing.TB, hold bool) *testListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tl := &testListener{Listener: ln}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tl.accepted.Add(1)
			if hold {
				held = append(held, c)
			} else {
				c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	return tl
}

func TestOpenBreakerSendsNothing(t *testing.T) {
	ln := newTestListener(t, false)
	l := newTest(failFastClient(t, ln.Addr().String()), WithBreaker(2, time.Hour, time.Hour), withoutHeartbeat()) // a beat in flight would connect
	ctx := context.Background()
	for range 2 {
		_, err := l.Allow(ctx, breakerReq)
		require.ErrorIs(t, err, ratelimit.ErrBackend)
		require.NotErrorIs(t, err, ratelimit.ErrCircuitOpen)
	}
	require.Positive(t, ln.accepted.Load())
	before := ln.accepted.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, err := l.Allow(ctx, breakerReq)
				assert.ErrorIs(t, err, ratelimit.ErrCircuitOpen)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, before, ln.accepted.Load(), "no connection while the breaker is open")
}

func TestBreakerIgnoresErrorsThatAreNotRedisBeingDown(t *testing.T) {
	ctx := context.Background()
	t.Run("reply errors", func(t *testing.T) {
		l := newTestRedis(t, WithBreaker(2, time.Hour, time.Hour))
		// A key of the wrong type makes the script fail for this name only.
		require.NoError(t, rdb(t).Set(ctx, l.Key("breaker", "", 0, breakerReq.Limits[0].Algorithm), "x", 0).Err())
		for range 5 {
			_, err := l.Allow(ctx, breakerReq)
			require.ErrorIs(t, err, ratelimit.ErrBackend)
		}
		assert.False(t, l.CircuitOpen())
		_, err := l.Allow(ctx, ratelimit.Request{Name: "other", Limits: breakerReq.Limits})
		assert.NoError(t, err, "other names are decided")
	})
	t.Run("cancelled calls", func(t *testing.T) {
		l := New(failFastClient(t, stoppedAddr(t)), WithBreaker(2, time.Hour, time.Hour))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		for range 5 {
			_, err := l.Allow(cctx, breakerReq)
			require.ErrorIs(t, err, ratelimit.ErrBackend)
		}
		assert.False(t, l.CircuitOpen())
	})
}

func TestOpenBreakerProbesInTheBackground(t *testing.T) {
	// A listener that never answers: each probe is one connection
	// that times out. The calls are all refused at once, none probes.
	ln := newTestListener(t, true)
	const backoff = 20 * time.Millisecond
	l := newTest(failFastClient(t, ln.Addr().String()), WithBreaker(1, backoff, backoff), withoutHeartbeat())
	ctx := context.Background()
	_, err := l.Allow(ctx, breakerReq)
	require.NotErrorIs(t, err, ratelimit.ErrCircuitOpen)
	require.True(t, l.CircuitOpen())
	opened := time.Now()
	before := ln.accepted.Load()

	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				_, err := l.Allow(ctx, breakerReq)
				if assert.ErrorIs(t, err, ratelimit.ErrCircuitOpen) {
					refused.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	// Let a probe or two happen even on a machine that ran the calls fast.
	time.Sleep(3 * backoff)
	elapsed := time.Since(opened)
	assert.Equal(t, int64(1600), refused.Load())
	probes := ln.accepted.Load() - before
	// One probe per back-off at most (each opens a connection here, since
	// a timed-out connection is closed), whatever the number of calls.
	assert.LessOrEqual(t, probes, int64(elapsed/backoff)+1, "in %v", elapsed)
	require.Eventually(t, func() bool { return ln.accepted.Load() > before }, time.Minute, time.Millisecond, "no probe")
	assert.True(t, l.CircuitOpen(), "the probes failed: still open")
}

func assertIsOpen(err error) bool {
	var be *ratelimit.BackendError
	return errors.As(err, &be) && be.Err == ratelimit.ErrCircuitOpen
}

// BenchmarkBreakerOpenCall measures a call refused by the open breaker:
// what each call costs while Redis is down, once the breaker has opened.
func BenchmarkBreakerOpenCall(b *testing.B) {
	l := New(failFastClient(b, stoppedAddr(b)), WithBreaker(1, time.Hour, time.Hour))
	ctx := context.Background()
	_, _ = l.Allow(ctx, breakerReq)
	if !l.CircuitOpen() {
		b.Fatal("breaker did not open")
	}
	rule := &ratelimit.Rule{Name: breakerReq.Name, Limits: breakerReq.Limits, OnError: ratelimit.FailOpen}
	b.ReportAllocs()
	for b.Loop() {
		if err := rule.Check(ctx, l, 1, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFailingCallBreakerClosed measures a call to a Redis that
// accepts connections and never answers, with the breaker off: it costs
// the client's read timeout (20ms here) and no more.
func BenchmarkFailingCallBreakerClosed(b *testing.B) {
	ln := newTestListener(b, true)
	c := redis.NewClient(&redis.Options{
		Addr: ln.Addr().String(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 20 * time.Millisecond, ReadTimeout: 20 * time.Millisecond,
	})
	defer c.Close()
	l := New(c, WithBreaker(0, 0, 0))
	ctx := context.Background()
	for b.Loop() {
		if _, err := l.Allow(ctx, breakerReq); err == nil {
			b.Fatal("a silent server decided a call")
		}
	}
}

func TestBreakerPerClusterMaster(t *testing.T) {
	cluster, err := redistest.StartCluster(3)
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:         cluster.Addrs(),
		DialTimeout:   10 * time.Second, // a killed master refuses at once
		ReadTimeout:   10 * time.Second,
		DialerRetries: 1,
		MaxRetries:    -1,
		MaxRedirects:  1,
	})
	t.Cleanup(func() { c.Close() })
	l := New(c, WithBreaker(2, time.Hour, time.Hour))
	ctx := context.Background()

	// One name on each master.
	nameOn := map[string]string{}
	for i := 0; len(nameOn) < 3; i++ {
		require.Less(t, i, 1000)
		name := fmt.Sprintf("node-%d", i)
		m, err := c.MasterForKey(ctx, l.Key(name, "", 0, ratelimit.SlidingLog))
		require.NoError(t, err)
		if _, ok := nameOn[m.Options().Addr]; !ok {
			nameOn[m.Options().Addr] = name
		}
	}
	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 1000}}
	for _, name := range nameOn {
		require.True(t, allow(t, l, ratelimit.Request{Name: name, Limits: lim}).Allowed)
	}

	victim := cluster.Addrs()[0]
	cluster.Kill(0)
	for i := range 5 {
		_, err := l.Allow(ctx, ratelimit.Request{Name: nameOn[victim], Limits: lim})
		require.ErrorIs(t, err, ratelimit.ErrBackend)
		if i < 2 {
			assert.NotErrorIs(t, err, ratelimit.ErrCircuitOpen, "call %d reached for the master", i)
		} else {
			assert.ErrorIs(t, err, ratelimit.ErrCircuitOpen, "call %d", i)
		}
	}
	assert.True(t, l.CircuitOpen())
	for addr, name := range nameOn {
		if addr != victim {
			assert.True(t, allow(t, l, ratelimit.Request{Name: name, Limits: lim}).Allowed, "master %s is up", addr)
		}
	}
}
