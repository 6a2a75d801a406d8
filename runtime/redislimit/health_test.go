package redislimit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// TestHealthCheck: a reachable server passes, after SCRIPT FLUSH too (and
// every master of a cluster: TestCluster/HealthCheck); an unreachable one
// fails with an error wrapping ErrBackend that says why.
func TestHealthCheck(t *testing.T) {
	ctx := context.Background()
	l := newTestRedis(t)
	require.NoError(t, rdb(t).ScriptFlush(ctx).Err())
	require.NoError(t, l.HealthCheck(ctx))
	ok, err := rdb(t).ScriptExists(ctx, decideScript.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, ok, "the check loads the scripts")

	down := New(newUnreachableClient(t))
	err = down.HealthCheck(ctx)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	assert.Contains(t, err.Error(), "unreachable")
}

func (ct *clusterTest) healthCheck(t *testing.T) {
	l, _ := ct.limiter(t)
	require.NoError(t, l.HealthCheck(context.Background()), "every master answers")
}

// TestAnOutageIsLoggedOnceWithoutAHook: a limiter with no hook that
// cannot reach Redis logs the outage once, at Warn, however many calls
// fail open, and its end at Info.
func TestAnOutageIsLoggedOnceWithoutAHook(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	l := New(failFastClient(t, stoppedAddr(t)), WithBreaker(2, time.Hour, time.Hour))
	rule := &ratelimit.Rule{Name: "quiet", Limits: perPeriod(1, time.Minute), OnError: ratelimit.FailOpen}
	for range 50 {
		require.NoError(t, rule.Check(context.Background(), l, 1, "k"), "fail open")
	}
	require.True(t, l.CircuitOpen())
	assert.Equal(t, 1, strings.Count(buf.String(), "level=WARN"), buf.String())
	assert.Contains(t, buf.String(), "ratelimit: circuit open")
}

// TestAnOutageIsLoggedWithAMetricsHook: a metrics hook counts the
// breaker's openings, and the outage is still logged once at Warn: a
// hook that does not log never silences the warning. A hook that logs
// (a SlogHook among several hooks) logs it, once, to its own logger.
func TestAnOutageIsLoggedWithAMetricsHook(t *testing.T) {
	var def bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	rule := &ratelimit.Rule{Name: "quiet", Limits: perPeriod(1, time.Minute), OnError: ratelimit.FailOpen}
	outage := func(hook ratelimit.Hook) *Limiter {
		l := New(failFastClient(t, stoppedAddr(t)), WithBreaker(2, time.Hour, time.Hour), ratelimit.WithHook(hook))
		for range 50 {
			require.NoError(t, rule.Check(context.Background(), l, 1, "k"), "fail open")
		}
		require.True(t, l.CircuitOpen())
		return l
	}

	m := &limitmetrics.Metrics{}
	outage(m)
	assert.Equal(t, 1, strings.Count(def.String(), "ratelimit: circuit open"), def.String())
	assert.Equal(t, 1, strings.Count(def.String(), "level=WARN"), def.String())
	for _, b := range m.Breakers() {
		assert.Equal(t, uint64(1), b.Opened, "the metrics count it too")
	}

	def.Reset()
	var own bytes.Buffer
	outage(ratelimit.NewConfig(ratelimit.WithHook(&limitmetrics.Metrics{}, ratelimit.NewSlogHook(slog.New(slog.NewTextHandler(&own, nil))))).Hook)
	assert.Equal(t, 1, strings.Count(own.String(), "ratelimit: circuit open"), own.String())
	assert.NotContains(t, def.String(), "circuit open", "logged once, by the hook that logs")
}
