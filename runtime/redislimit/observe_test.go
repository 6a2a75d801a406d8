package redislimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// logLines returns the records logged to buf without their time.
func logLines(buf fmt.Stringer) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// lockedBuffer is a buffer that a test reads while others write it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTextLogger(buf io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func TestSlogHook(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		var buf bytes.Buffer
		l := newLimiter(ratelimit.WithClock(newManualClock()), ratelimit.WithHook(ratelimit.NewSlogHook(newTextLogger(&buf, slog.LevelDebug))))
		ctx := context.Background()
		rule := &ratelimit.Rule{Name: "svc.Get", Limits: perPeriod(1, time.Minute)}
		require.NoError(t, rule.Check(ctx, l, 1, "u1"))
		require.ErrorIs(t, rule.Check(ctx, l, 1, "u1"), ratelimit.ErrLimited)
		shadow := &ratelimit.Rule{Name: "svc.Put", Limits: perPeriod(1, time.Minute), Shadow: true}
		require.NoError(t, shadow.Check(ctx, l, 1, ""))
		require.NoError(t, shadow.Check(ctx, l, 1, ""))
		assert.Equal(t, []string{
			`level=DEBUG msg="ratelimit: admitted" name=svc.Get key=sha256:bb82030dbc2b cost=1 limit="1/1m0s (sliding_log)" remaining=0 reset_after=1m0s`,
			`level=WARN msg="ratelimit: limited" name=svc.Get key=sha256:bb82030dbc2b cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1m0s reset_after=1m0s`,
			`level=DEBUG msg="ratelimit: admitted" name=svc.Put cost=1 limit="1/1m0s (sliding_log)" remaining=0 reset_after=1m0s`,
			`level=INFO msg="ratelimit: shadow limited" name=svc.Put cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1m0s reset_after=1m0s`,
		}, logLines(&buf))
	})
}

func TestSlogHookFailures(t *testing.T) {
	var buf bytes.Buffer
	l := New(newUnreachableClient(t), ratelimit.WithHook(ratelimit.NewSlogHook(newTextLogger(&buf, slog.LevelWarn))))
	rule := &ratelimit.Rule{Name: "down", Limits: perPeriod(5, time.Minute)}
	require.NoError(t, rule.Check(context.Background(), l, 2, "k"))
	lines := logLines(&buf)
	require.Len(t, lines, 1)
	assert.True(t, strings.HasPrefix(lines[0], `level=ERROR msg="ratelimit: backend failure" name=down key=sha256:8254c329a928 cost=2 error="ratelimit: down: backend failure: `), lines[0])
	assert.Contains(t, lines[0], "connection refused")
}

func TestSlogHookSkipsDisabledLevels(t *testing.T) {
	var buf bytes.Buffer
	l := ratelimit.NewMemory(ratelimit.WithHook(ratelimit.NewSlogHook(newTextLogger(&buf, slog.LevelInfo))))
	rule := &ratelimit.Rule{Name: "quiet", Limits: perPeriod(1, time.Minute)}
	require.NoError(t, rule.Check(context.Background(), l, 1, ""))
	assert.Empty(t, buf.String(), "admissions are Debug")
}

func TestMetricsUnderConcurrency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		m := &limitmetrics.Metrics{}
		l := newLimiter(ratelimit.WithHook(m))
		const goroutines, calls = 8, 50
		rules := []*ratelimit.Rule{
			{Name: "m/a", Limits: perPeriod(100, time.Hour)},
			{Name: "m/b", Limits: perPeriod(30, time.Hour), Shadow: true},
		}
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range calls {
					err := rules[(g+i)%2].Check(context.Background(), l, 1, "")
					if err != nil {
						assert.ErrorIs(t, err, ratelimit.ErrLimited)
					}
					_ = m.Snapshot() // readers race with writers
				}
			})
		}
		wg.Wait()
		snap := m.Snapshot()
		a, b := snap["m/a"], snap["m/b"]
		// The Redis limiter's deny cache repeats some of the denials.
		if _, redis := l.(*Limiter); !redis {
			assert.Zero(t, a.Cached+b.Cached)
		}
		assert.LessOrEqual(t, a.Cached, a.Limited)
		assert.LessOrEqual(t, b.Cached, b.ShadowLimited)
		a.Cached, b.Cached = 0, 0
		assert.Equal(t, limitmetrics.Counters{Allowed: 100, Limited: 100, NearLimit: 11}, a)
		assert.Equal(t, limitmetrics.Counters{Allowed: 30, ShadowLimited: 170, NearLimit: 4}, b)
	})
}

func TestMetricsCountsBackendErrors(t *testing.T) {
	m := &limitmetrics.Metrics{}
	l := New(newUnreachableClient(t), ratelimit.WithHook(m), WithBreaker(1, time.Hour, time.Hour))
	rule := &ratelimit.Rule{Name: "err", Limits: perPeriod(1, time.Minute), OnError: ratelimit.FailClosed}
	for range 3 {
		require.ErrorIs(t, rule.Check(context.Background(), l, 1, ""), ratelimit.ErrBackend)
	}
	assert.Equal(t, limitmetrics.Counters{BackendErrors: 3}, m.Snapshot()["err"])
}

// recordingShadowHook records what it is told, in order.
type recordingShadowHook struct {
	mu     sync.Mutex
	events []string
}

func (h *recordingShadowHook) add(s string) {
	h.mu.Lock()
	h.events = append(h.events, s)
	h.mu.Unlock()
}

func (h *recordingShadowHook) Decided(_ context.Context, req *ratelimit.Request, d ratelimit.Decision) {
	h.add(fmt.Sprintf("decided %s %v", req.Name, d.Allowed))
}

func (h *recordingShadowHook) ShadowLimited(_ context.Context, req *ratelimit.Request, _ ratelimit.Decision) {
	h.add("shadow " + req.Name)
}

func (h *recordingShadowHook) Failed(_ context.Context, req *ratelimit.Request, err error) {
	h.add(fmt.Sprintf("failed %s %v", req.Name, err))
}

func TestHooksReportToEach(t *testing.T) {
	a, b := &recordingShadowHook{}, &recordingHook{}
	h := ratelimit.NewConfig(ratelimit.WithHook(a, nil, b)).Hook
	ctx := context.Background()
	req := &ratelimit.Request{Name: "x"}
	h.Decided(ctx, req, ratelimit.Decision{Allowed: true})
	h.(ratelimit.ShadowHook).ShadowLimited(ctx, req, ratelimit.Decision{})
	h.Failed(ctx, req, errors.New("boom"))
	assert.Equal(t, []string{"decided x true", "shadow x", "failed x boom"}, a.events)
	assert.Equal(t, 2, b.decided, "a plain hook gets the would-be denial as a denial")
	assert.Equal(t, 1, b.failed)
}

func TestShadowDenialsOnlyFromShadowRules(t *testing.T) {
	h := &recordingShadowHook{}
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()), ratelimit.WithHook(h))
	ctx := context.Background()
	real := &ratelimit.Rule{Name: "real", Limits: perPeriod(1, time.Minute)}
	shadow := &ratelimit.Rule{Name: "shadow", Limits: perPeriod(1, time.Minute), Shadow: true}
	require.NoError(t, real.Check(ctx, l, 1, ""))
	require.Error(t, real.Check(ctx, l, 1, ""))
	require.NoError(t, shadow.Check(ctx, l, 1, ""))
	require.NoError(t, shadow.Check(ctx, l, 1, ""))
	// A direct Allow is never a shadow decision.
	_, err := l.Allow(ctx, ratelimit.Request{Name: "shadow", Limits: shadow.Limits})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"decided real true", "decided real false",
		"decided shadow true", "shadow shadow",
		"decided shadow false",
	}, h.events)
}

func TestSlogHookLogsAnOutageOncePerStateChange(t *testing.T) {
	var buf lockedBuffer
	hook := ratelimit.NewSlogHook(newTextLogger(&buf, slog.LevelInfo))
	metrics := &limitmetrics.Metrics{}
	addr := stoppedAddr(t)
	l := New(failFastClient(t, addr), ratelimit.WithHook(hook, metrics), WithBreaker(2, 20*time.Millisecond, 20*time.Millisecond))
	rule := &ratelimit.Rule{Name: "flood", Limits: perPeriod(1000, time.Minute), OnError: ratelimit.FailOpen}
	ctx := context.Background()
	for range 100 {
		require.NoError(t, rule.Check(ctx, l, 1, ""))
	}
	lines := logLines(&buf)
	require.Len(t, lines, 3, "two failures that opened the breaker and its opening:\n%s", strings.Join(lines, "\n"))
	var failures, opened int
	for _, line := range lines {
		switch {
		case strings.HasPrefix(line, "level=ERROR msg=\"ratelimit: backend failure\" name=flood"):
			failures++
		case strings.HasPrefix(line, "level=WARN msg=\"ratelimit: circuit open\" node="+addr+" error="):
			opened++
		}
	}
	assert.Equal(t, 2, failures)
	assert.Equal(t, 1, opened)
	assert.Equal(t, uint64(100), metrics.Snapshot()["flood"].BackendErrors, "metrics count every failure")
	assert.Equal(t, map[string]limitmetrics.BreakerState{addr: {Open: true, Opened: 1}}, metrics.Breakers())

	// Redis comes back: one line says so, and the calls are decided.
	s, err := redistest.StartOn(addr)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	require.Eventually(t, func() bool { return len(logLines(&buf)) == 4 }, 10*time.Second, time.Millisecond)
	for range 100 {
		require.NoError(t, rule.Check(ctx, l, 1, ""))
	}
	lines = logLines(&buf)
	require.Len(t, lines, 4, strings.Join(lines, "\n"))
	assert.Contains(t, lines[3], "level=INFO msg=\"ratelimit: circuit closed\" node="+addr+" open_for=")
	assert.Equal(t, uint64(100), metrics.Snapshot()["flood"].Allowed)
	assert.Equal(t, map[string]limitmetrics.BreakerState{addr: {Open: false, Opened: 1}}, metrics.Breakers())
}

// TestSlogHookAbusiveClientOnRedis is issue 18's acceptance on a real
// Redis with the deny cache on: goroutines of one client call far over
// its limit for abuseFor and write one line, which shows the digest of its
// key, never the key.
func TestSlogHookAbusiveClientOnRedis(t *testing.T) {
	const abuseFor, apiKey = time.Second, "sk_live_4f9a2c7e1b"
	var buf lockedBuffer
	metrics := &limitmetrics.Metrics{}
	hook := ratelimit.NewSlogHook(newTextLogger(&buf, slog.LevelInfo))
	l := newTestRedis(t, WithDenyCache(DefaultDenyCache), ratelimit.WithHook(metrics, hook))
	rule := &ratelimit.Rule{Name: "svc.API.Search", Limits: perPeriod(2, 30*time.Second)}
	var wg sync.WaitGroup
	stop := time.Now().Add(abuseFor)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if err := rule.Check(context.Background(), l, 1, apiKey); err != nil {
					assert.ErrorIs(t, err, ratelimit.ErrLimited)
				}
			}
		})
	}
	wg.Wait()
	m := metrics.Snapshot()["svc.API.Search"]
	require.Greater(t, m.Limited, uint64(1000))
	require.Greater(t, m.Cached, m.Limited/2, "most denials are the cache's")
	lines := logLines(&buf)
	require.Len(t, lines, 1, strings.Join(lines, "\n"))
	assert.True(t, strings.HasPrefix(lines[0], `level=WARN msg="ratelimit: limited" name=svc.API.Search key=sha256:`), lines[0])
	assert.NotContains(t, buf.String(), apiKey)
	t.Logf("%d calls in %s: %d lines", m.Allowed+m.Limited, abuseFor, len(lines))
}
