package ratelimit

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
)

var breakerReq = Request{Name: "breaker", Limits: []Limit{{Period: time.Second, Threshold: 100}}}

// failFastClient returns a client of addr that tries each command once
// and waits 200 ms for a connection or a reply, so that calls to a stalled
// server fail.
func failFastClient(t testing.TB, addr string) *redis.Client {
	return onceClient(t, addr, 200*time.Millisecond)
}

// onceClient returns a client of addr that tries each command once and
// waits up to timeout for a connection or a reply.
func onceClient(t testing.TB, addr string, timeout time.Duration) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		MaxRetries:    -1,
		DialerRetries: 1,
		DialTimeout:   timeout,
		ReadTimeout:   timeout,
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

func TestBreakerStates(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := newBreaker(breakerConfig{failures: 3, backoff: time.Second, maxBackoff: 3 * time.Second})
	b.now = func() time.Time { return now }
	mustAllow := func(wantProbe bool) {
		t.Helper()
		ok, probe := b.allow()
		require.True(t, ok)
		require.Equal(t, wantProbe, probe)
	}
	refused := func() {
		t.Helper()
		ok, _ := b.allow()
		require.False(t, ok)
	}

	for range 2 {
		mustAllow(false)
		b.failed(false)
	}
	mustAllow(false)
	b.succeeded()
	for range 2 {
		mustAllow(false)
		b.failed(false)
	}
	mustAllow(false)
	assert.False(t, b.open(), "a success resets the count: 2 failures in a row so far")
	b.failed(false)
	assert.True(t, b.open())
	refused()

	// Half-open after the back-off: one probe, the others still refused.
	now = now.Add(time.Second)
	mustAllow(true)
	refused()
	b.failed(true)
	now = now.Add(time.Second)
	refused() // the back-off doubled to 2s
	now = now.Add(time.Second)
	mustAllow(true)
	b.failed(true)
	now = now.Add(3 * time.Second) // capped at 3s
	mustAllow(true)
	b.abandoned(true) // a cancelled probe says nothing: the next call probes
	mustAllow(true)
	b.succeeded()
	assert.False(t, b.open())
	mustAllow(false)
	mustAllow(false)

	// Closed again with the base back-off.
	for range 3 {
		b.failed(false)
	}
	now = now.Add(time.Second)
	mustAllow(true)
}

func TestBreakerOffWithZeroFailures(t *testing.T) {
	l := NewRedis(failFastClient(t, stoppedAddr(t)), WithBreaker(0, 0, 0))
	for range 10 {
		_, err := l.Allow(context.Background(), breakerReq)
		require.ErrorIs(t, err, ErrBackend)
		require.NotErrorIs(t, err, ErrCircuitOpen)
	}
	assert.False(t, l.CircuitOpen())
}

func TestBreakerOpensAndRecoversWithARealServer(t *testing.T) {
	addr := stoppedAddr(t)
	metrics := &Metrics{}
	l := NewRedis(failFastClient(t, addr), WithBreaker(3, 50*time.Millisecond, time.Second), WithHook(metrics))
	ctx := context.Background()
	for i := range 3 {
		_, err := l.Allow(ctx, breakerReq)
		require.ErrorIs(t, err, ErrBackend)
		require.NotErrorIs(t, err, ErrCircuitOpen, "call %d reached for Redis", i)
	}
	require.True(t, l.CircuitOpen())
	_, err := l.Allow(ctx, breakerReq)
	require.ErrorIs(t, err, ErrCircuitOpen)
	require.ErrorIs(t, err, ErrBackend)
	var be *BackendError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "breaker", be.Name)
	assert.Equal(t, uint64(4), metrics.Snapshot()["breaker"].BackendErrors, "open-circuit failures are reported too")

	// The policies apply at once.
	closed := &Rule{Name: "breaker", Limits: breakerReq.Limits, OnError: FailClosed}
	assert.ErrorIs(t, closed.Check(ctx, l, "", 1), ErrCircuitOpen)
	open := &Rule{Name: "breaker", Limits: breakerReq.Limits, OnError: FailOpen}
	assert.NoError(t, open.Check(ctx, l, "", 1))

	// A server comes up where the client looks: a probe finds it and the
	// breaker closes.
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
}

// testListener accepts connections on loopback and counts them. It closes
// each at once (a Redis that is there but broken) or, with hold, keeps it
// open and never answers (a Redis that hangs), until dropHeld or the end
// of the test.
type testListener struct {
	net.Listener
	accepted atomic.Int64

	mu   sync.Mutex
	held []net.Conn
}

func newTestListener(t testing.TB, hold bool) *testListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tl := &testListener{Listener: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if hold {
				tl.mu.Lock()
				tl.held = append(tl.held, c)
				tl.mu.Unlock()
			} else {
				c.Close()
			}
			tl.accepted.Add(1)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		tl.dropHeld()
	})
	return tl
}

// dropHeld closes the connections held so far: the commands waiting on
// them fail at once, as when a hung Redis dies.
func (tl *testListener) dropHeld() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, c := range tl.held {
		c.Close()
	}
	tl.held = nil
}

func TestOpenBreakerSendsNothing(t *testing.T) {
	ln := newTestListener(t, false)
	l := NewRedis(failFastClient(t, ln.Addr().String()), WithBreaker(2, time.Hour, time.Hour))
	ctx := context.Background()
	for range 2 {
		_, err := l.Allow(ctx, breakerReq)
		require.ErrorIs(t, err, ErrBackend)
		require.NotErrorIs(t, err, ErrCircuitOpen)
	}
	require.Positive(t, ln.accepted.Load())
	before := ln.accepted.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, err := l.Allow(ctx, breakerReq)
				assert.ErrorIs(t, err, ErrCircuitOpen)
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
			require.ErrorIs(t, err, ErrBackend)
		}
		assert.False(t, l.CircuitOpen())
		_, err := l.Allow(ctx, Request{Name: "other", Limits: breakerReq.Limits})
		assert.NoError(t, err, "other names are decided")
	})
	t.Run("cancelled calls", func(t *testing.T) {
		l := NewRedis(failFastClient(t, stoppedAddr(t)), WithBreaker(2, time.Hour, time.Hour))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		for range 5 {
			_, err := l.Allow(cctx, breakerReq)
			require.ErrorIs(t, err, ErrBackend)
		}
		assert.False(t, l.CircuitOpen())
	})
}

func TestBreakerHalfOpenLetsOneProbeThrough(t *testing.T) {
	// A listener that never answers holds the probe until the test drops
	// it, while the other calls are refused at once.
	ln := newTestListener(t, true)
	l := NewRedis(onceClient(t, ln.Addr().String(), time.Minute), WithBreaker(1, 20*time.Millisecond, time.Hour))
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := l.Allow(ctx, breakerReq)
		first <- err
	}()
	require.Eventually(t, func() bool { return ln.accepted.Load() > 0 }, time.Minute, time.Millisecond)
	ln.dropHeld()
	require.NotErrorIs(t, <-first, ErrCircuitOpen)
	require.True(t, l.CircuitOpen())
	opened := ln.accepted.Load()
	time.Sleep(30 * time.Millisecond) // past the back-off

	var open, tried atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := l.Allow(ctx, breakerReq)
			if assert.ErrorIs(t, err, ErrBackend) {
				if assertIsOpen(err) {
					open.Add(1)
				} else {
					tried.Add(1)
				}
			}
		})
	}
	// The seven refused, the probe held: drop it.
	require.Eventually(t, func() bool { return open.Load() == 7 && ln.accepted.Load() > opened },
		time.Minute, time.Millisecond, "%d refused, %d connections", open.Load(), ln.accepted.Load()-opened)
	ln.dropHeld()
	wg.Wait()
	assert.Equal(t, int64(1), tried.Load(), "one probe")
	assert.Equal(t, int64(7), open.Load())
	assert.LessOrEqual(t, ln.accepted.Load()-opened, int64(1))
	assert.True(t, l.CircuitOpen(), "the probe failed: open again")
}

func assertIsOpen(err error) bool {
	var be *BackendError
	return errors.As(err, &be) && be.Err == ErrCircuitOpen
}

// BenchmarkBreakerOpenCall measures a call refused by the open breaker:
// what each call costs while Redis is down, once the breaker has opened.
func BenchmarkBreakerOpenCall(b *testing.B) {
	l := NewRedis(failFastClient(b, stoppedAddr(b)), WithBreaker(1, time.Hour, time.Hour))
	ctx := context.Background()
	_, _ = l.Allow(ctx, breakerReq)
	if !l.CircuitOpen() {
		b.Fatal("breaker did not open")
	}
	rule := &Rule{Name: breakerReq.Name, Limits: breakerReq.Limits, OnError: FailOpen}
	b.ReportAllocs()
	for b.Loop() {
		if err := rule.Check(ctx, l, "", 1); err != nil {
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
	l := NewRedis(c, WithBreaker(0, 0, 0))
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
	l := NewRedis(c, WithBreaker(2, time.Hour, time.Hour))
	ctx := context.Background()

	// One name on each master.
	nameOn := map[string]string{}
	for i := 0; len(nameOn) < 3; i++ {
		require.Less(t, i, 1000)
		name := fmt.Sprintf("node-%d", i)
		m, err := c.MasterForKey(ctx, l.Key(name, "", 0, SlidingLog))
		require.NoError(t, err)
		if _, ok := nameOn[m.Options().Addr]; !ok {
			nameOn[m.Options().Addr] = name
		}
	}
	lim := []Limit{{Period: time.Minute, Threshold: 1000}}
	for _, name := range nameOn {
		require.True(t, allow(t, l, Request{Name: name, Limits: lim}).Allowed)
	}

	victim := cluster.Addrs()[0]
	cluster.Kill(0)
	for i := range 5 {
		_, err := l.Allow(ctx, Request{Name: nameOn[victim], Limits: lim})
		require.ErrorIs(t, err, ErrBackend)
		if i < 2 {
			assert.NotErrorIs(t, err, ErrCircuitOpen, "call %d reached for the master", i)
		} else {
			assert.ErrorIs(t, err, ErrCircuitOpen, "call %d", i)
		}
	}
	assert.True(t, l.CircuitOpen())
	for addr, name := range nameOn {
		if addr != victim {
			assert.True(t, allow(t, l, Request{Name: name, Limits: lim}).Allowed, "master %s is up", addr)
		}
	}
}
