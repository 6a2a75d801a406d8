package redislimit

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// saasLine returns two rules sharing one line, a fixed window of limit
// per minute under FailLocal (the SaaS case of issue 34: a plan's line
// that every method of a service shares), and the line's Redis key.
func saasLine(l *Limiter, limit int64) ([]*ratelimit.Rule, string) {
	line := []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Minute, Threshold: limit}}
	rules := []*ratelimit.Rule{
		{Name: "svc.Get", Limits: line, KeyExprs: []string{""}, Shared: []string{"saas"}, OnError: ratelimit.FailLocal},
		{Name: "svc.Put", Limits: line, KeyExprs: []string{""}, Shared: []string{"saas"}, OnError: ratelimit.FailLocal},
	}
	return rules, l.Key("saas", "", 0, ratelimit.FixedWindow)
}

// awaitRoom waits until the current window of period, on the process's
// clock (the server's, on this machine), has room left for a test that
// must stay in one window.
func awaitRoom(t *testing.T, period, room time.Duration) {
	t.Helper()
	if left := period - time.Duration(time.Now().UnixNano())%period; left < room {
		t.Logf("waiting %v for the next window", left)
		time.Sleep(left + 10*time.Millisecond)
	}
}

// lineCount reads the count a fixed window's key holds (0 when absent).
func lineCount(t *testing.T, s *redistest.Server, key string) int64 {
	t.Helper()
	v, err := adminClient(t, s.Addr).Get(context.Background(), key).Result()
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

// TestLedgerRefillsALineAfterFlushAll: three processes (each a limiter
// on a client of its own, counting a fleet of 3) fill a shared line of
// 100 a minute through Redis; FLUSHALL empties Redis, opening no breaker;
// within about a heartbeat's period each process finds the epoch marker
// changed and charges Redis again what it had admitted, so the line holds
// 100 again and the next call is denied.
func TestLedgerRefillsALineAfterFlushAll(t *testing.T) {
	s, ls := fleetOf(t, 3)
	const limit = 100
	rules, key := saasLine(ls[0], limit)
	ctx := context.Background()
	awaitRoom(t, time.Minute, 20*time.Second)
	for i := range limit {
		a, err := rules[i%2].Admit(ctx, ls[i%3], 1, "")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceBackend, a.Decision.Source)
	}
	require.EqualValues(t, limit, lineCount(t, s, key))

	require.NoError(t, adminClient(t, s.Addr).FlushAll(ctx).Err())
	flushed := time.Now()
	require.Eventually(t, func() bool { return lineCount(t, s, key) == limit }, 30*time.Second, time.Millisecond, "the ledgers refill the line")
	t.Logf("the line held %d again %v after FLUSHALL", limit, time.Since(flushed))
	var charged int64
	for i, l := range ls {
		require.Eventually(t, func() bool { n, _, _ := l.fallback.Restored(); return n == 1 }, 30*time.Second, time.Millisecond)
		losses, c, dropped := l.fallback.Restored()
		t.Logf("process %d: %d loss, %d units charged again, %d dropped", i, losses, c, dropped)
		charged += c
		assert.False(t, l.CircuitOpen(), "no breaker opened")
		assert.Zero(t, l.fallback.Held(), "the fallback admitted nothing")
	}
	assert.EqualValues(t, limit, charged, "each process charged what it had admitted, once")
	assert.EqualValues(t, limit, lineCount(t, s, key))
	for _, l := range ls {
		a, err := rules[0].Admit(ctx, l, 1, "")
		require.ErrorIs(t, err, ratelimit.ErrLimited, "the line is full again")
		assert.Equal(t, ratelimit.SourceBackend, a.Decision.Source)
	}
}

// TestLedgerAcrossARestart: three processes fill a shared line of 100 a
// minute through Redis; the server is killed (SIGKILL), the breakers open
// and each fallback admits a few calls, and a server is started empty on
// the same port. Each probe that finds it back finds the epoch marker
// gone and charges the ledger, then the fallback's admissions, before its
// breaker closes: the minute admits at most its limit plus what the
// fallbacks admitted (docs/reliability.md, What a restart forgets), where
// without the ledgers Redis would admit the limit again less the
// fallbacks' admissions.
func TestLedgerAcrossARestart(t *testing.T) {
	s, ls := fleetOf(t, 3)
	const limit, during = 100, 5
	rules, key := saasLine(ls[0], limit)
	ctx := context.Background()
	awaitRoom(t, time.Minute, 40*time.Second)
	for i := range limit {
		require.NoError(t, rules[i%2].Check(ctx, ls[i%3], 1, ""))
	}
	addr := s.Addr
	s.Stop()
	var byFallback int64
	for i, l := range ls {
		for range during {
			a, err := rules[i%2].Admit(ctx, l, 1, "")
			if err == nil {
				require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
				byFallback++
				continue
			}
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le, "the fallback decides")
			require.Equal(t, ratelimit.SourceFallback, le.Source)
		}
		require.Eventually(t, l.CircuitOpen, time.Minute, time.Millisecond)
	}
	assert.Zero(t, byFallback, "Redis said the line was full: the fallbacks admit nothing of it")
	s2, err := redistest.StartOn(addr)
	require.NoError(t, err)
	t.Cleanup(s2.Stop)
	awaitRedis(t, ls)

	var after int64
	for i := range 30 {
		a, err := rules[i%2].Admit(ctx, ls[i%3], 1, "")
		if err == nil {
			after++
		}
		require.Equal(t, ratelimit.SourceBackend, a.Decision.Source, "call %d", i)
	}
	for i, l := range ls {
		losses, charged, dropped := l.fallback.Restored()
		carried, carriedDropped := l.fallback.Carried()
		t.Logf("process %d: %d loss, ledger %d units charged, %d dropped; fallback %d carried, %d dropped", i, losses, charged, dropped, carried, carriedDropped)
		assert.EqualValues(t, 1, losses)
	}
	total := limit + byFallback + after
	t.Logf("the minute admitted %d: %d by Redis before the kill, %d by the fallbacks, %d by Redis after the restart", total, limit, byFallback, after)
	assert.LessOrEqual(t, total, limit+byFallback, "at most the limit plus what the fallbacks admitted")
	assert.EqualValues(t, limit, lineCount(t, s2, key), "the line is full again")
}

// TestHeartbeatScriptsRenderAsGolden compares the heartbeat's scripts
// with their text under testdata/scripts (rewritten with -update); the
// fleet and ledger tests run them.
func TestHeartbeatScriptsRenderAsGolden(t *testing.T) {
	for name, text := range map[string]string{"heartbeat": heartbeatText, "epoch": epochText} {
		file := filepath.Join("testdata", "scripts", name+".lua")
		if *updateScripts {
			require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
		}
		want, err := os.ReadFile(file)
		require.NoError(t, err, "run with -update to write it")
		if string(want) != text {
			t.Errorf("the rendered script differs from %s: run with -update, and review the diff", file)
		}
	}
}
