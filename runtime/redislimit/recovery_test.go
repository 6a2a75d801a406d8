package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
)

// recoveryReq is decided against a limit that admits every call, so that a
// decision tells only whether Redis decided.
var recoveryReq = ratelimit.Request{Name: "recovery", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1 << 40}}}

// adminClient returns a client of addr that waits out long commands.
func adminClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 30 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// commandCalls reads how many times the server ran each command since its
// statistics were reset, from INFO commandstats.
func commandCalls(t testing.TB, admin *redis.Client) map[string]int64 {
	t.Helper()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		require.NoError(t, err)
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls
}

// stallOutcome is what callers saw while a server stalled.
type stallOutcome struct {
	refused, sent int64         // calls refused by the open breaker; calls sent to Redis
	opened        bool          // the breaker was seen open
	took          time.Duration // from the stall's start to the first decision after it
}

// pauseWhileCalling pauses the clients of admin's server for d (CLIENT PAUSE ALL) while four
// goroutines call l with req, and returns once the stall is over and Redis
// decided a call again, under a generous deadline.
func pauseWhileCalling(t *testing.T, l *Limiter, admin *redis.Client, open func() bool, req ratelimit.Request, d time.Duration) stallOutcome {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	require.NoError(t, admin.ClientPause(ctx, d).Err())

	var out stallOutcome
	var over atomic.Bool // the stall ended
	var recovered sync.Once
	done := make(chan struct{})
	var seenOpen atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				_, err := l.Allow(ctx, req)
				switch {
				case errors.Is(err, ratelimit.ErrCircuitOpen):
					atomic.AddInt64(&out.refused, 1)
				case err == nil && over.Load():
					atomic.AddInt64(&out.sent, 1)
					recovered.Do(func() { close(done) })
				default:
					atomic.AddInt64(&out.sent, 1)
				}
				if open() {
					seenOpen.Store(true)
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	time.Sleep(time.Until(start.Add(d)))
	over.Store(true)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(done)
		wg.Wait()
		t.Fatal("Redis did not decide again after the stall")
	}
	wg.Wait()
	out.took = time.Since(start)
	out.opened = seenOpen.Load()
	return out
}

// assertProbesBounded checks that while the breaker was open the server
// got at most one probe (an EVAL) per back-off, and a decision (an
// EVALSHA) only from calls the breaker let through.
func assertProbesBounded(t *testing.T, admin *redis.Client, out stallOutcome, backoff time.Duration) {
	t.Helper()
	calls := commandCalls(t, admin)
	assert.True(t, out.opened, "the stall opened the breaker")
	assert.Positive(t, out.refused, "calls were refused while the breaker was open")
	// The breaker was open for less than the whole run, and probes at most
	// once per back-off while open; a slow machine probes less.
	assert.LessOrEqual(t, calls["eval"], int64(out.took/backoff)+1, "probes in %v", out.took)
	assert.LessOrEqual(t, calls["evalsha"], out.sent, "a refused call sent nothing")
}

// warm makes l decide a call of req once, loading its script, under a
// generous deadline: with a 50 ms read timeout, the first call (which
// loads the script) may time out on a loaded machine, and open the
// breaker, which then closes once a probe gets through.
func warm(t *testing.T, l *Limiter, req ratelimit.Request) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := l.Allow(context.Background(), req)
		return err == nil
	}, time.Minute, 10*time.Millisecond, "the server never decided a call")
}

func TestBreakerProbesAStalledServerAndCloses(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	admin := adminClient(t, s.Addr)
	client := redis.NewClient(&redis.Options{
		Addr: s.Addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond,
	})
	t.Cleanup(func() { client.Close() })
	const backoff = 50 * time.Millisecond
	l := New(client, WithBreaker(2, backoff, backoff))
	warm(t, l, recoveryReq)
	require.NoError(t, admin.ConfigResetStat(context.Background()).Err())

	out := pauseWhileCalling(t, l, admin, l.breakers.Down, recoveryReq, 1500*time.Millisecond)
	assertProbesBounded(t, admin, out, backoff)
	assert.False(t, l.CircuitOpen())
	assertNoProbe(t, l)
}

func TestBreakerProbesAStalledClusterMasterAndCloses(t *testing.T) {
	cluster, err := redistest.StartCluster(3)
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cluster.Addrs(), MaxRetries: -1, DialerRetries: 1, MaxRedirects: 1,
		DialTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	const backoff = 50 * time.Millisecond
	l := New(c, WithBreaker(2, backoff, backoff))
	ctx := context.Background()

	// A name on the first master, and one on another.
	victim := cluster.Addrs()[0]
	var onVictim, elsewhere ratelimit.Request
	for i := 0; onVictim.Name == "" || elsewhere.Name == ""; i++ {
		require.Less(t, i, 1000)
		req := ratelimit.Request{Name: fmt.Sprintf("node-%d", i), Limits: recoveryReq.Limits}
		m, err := c.MasterForKey(ctx, l.Key(req.Name, "", 0, ratelimit.SlidingLog))
		require.NoError(t, err)
		if m.Options().Addr == victim {
			onVictim = req
		} else {
			elsewhere = req
		}
	}
	warm(t, l, onVictim)
	warm(t, l, elsewhere)
	admin := adminClient(t, victim)
	require.NoError(t, admin.ConfigResetStat(ctx).Err())

	nodeOpen := func() bool { return l.breakers.NodeOpen(victim) }
	out := pauseWhileCalling(t, l, admin, nodeOpen, onVictim, 1500*time.Millisecond)
	assertProbesBounded(t, admin, out, backoff)
	assert.True(t, allow(t, l, elsewhere).Allowed, "the other masters decide throughout")
	assert.False(t, l.CircuitOpen())
	assertNoProbe(t, l)
}

func TestProbeNode(t *testing.T) {
	ctx := context.Background()
	opts := func(addr string) *redis.Options {
		return failFastClient(t, addr).Options()
	}
	require.NoError(t, probeNode(ctx, opts(srv.Addr)))

	err := probeNode(ctx, opts(stoppedAddr(t)))
	require.Error(t, err)
	assert.True(t, redisUnavailable(err), "a refused dial: %v", err)

	// A server that accepts and never answers times out.
	ln := newTestListener(t, true)
	err = probeNode(ctx, opts(ln.Addr().String()))
	require.Error(t, err)
	assert.True(t, redisUnavailable(err), "%v", err)
}
