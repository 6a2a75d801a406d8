package guard_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// epochFlaky is flaky with a heartbeat of its own (a fleet of one) and an
// epoch marker, as Redis keeps one beside its state: lose forgets a key's
// state and the marker, as a flush or a restart without persistence does.
type epochFlaky struct {
	flaky
	name  string
	mu    sync.Mutex
	epoch string
	beats atomic.Int64
}

func newEpochFlaky(name string) *epochFlaky {
	return &epochFlaky{flaky: flaky{MemoryLimiter: ratelimit.NewMemory()}, name: name}
}

func (e *epochFlaky) FleetName() any { return e.name }

func (e *epochFlaky) Beat(ctx context.Context, member string, now time.Time, ttl time.Duration) (int64, error) {
	n, _, err := e.BeatEpoch(ctx, member, now, ttl, "")
	return n, err
}

func (e *epochFlaky) BeatEpoch(ctx context.Context, _ string, _ time.Time, _ time.Duration, fresh string) (int64, string, error) {
	epoch, err := e.Epoch(ctx, fresh)
	if err != nil {
		return 0, "", err
	}
	e.beats.Add(1)
	return 1, epoch, nil
}

func (e *epochFlaky) Epoch(_ context.Context, fresh string) (string, error) {
	if e.down.Load() {
		return "", errDown
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.epoch == "" {
		e.epoch = fresh
	}
	return e.epoch, nil
}

func (e *epochFlaky) Leave(context.Context, string) error { return nil }

// lose forgets the state of name and key, and the epoch marker.
func (e *epochFlaky) lose(name, key string) {
	_ = e.MemoryLimiter.Reset(context.Background(), name, key)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.epoch = ""
}

// ledgerOf wraps backend in the guards, with a breaker of short backoffs
// and no WithFallbackProcesses (so the fallback counts its fleet, and
// keeps a ledger), and waits for the heartbeat's first beat, which reads
// the epoch marker.
func ledgerOf(t *testing.T, backend *epochFlaky) (ratelimit.Limiter, *guard.Breaker, *guard.Fallback) {
	t.Helper()
	l := guard.Wrap(backend, guard.WithBreaker(2, 5*time.Millisecond, 5*time.Millisecond))
	t.Cleanup(func() { guard.Close(l) })
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	fallback, ok := guard.Of[*guard.Fallback](l)
	require.True(t, ok)
	require.Eventually(t, func() bool { return backend.beats.Load() > 0 }, time.Minute, time.Millisecond, "the heartbeat beats")
	return l, breaker, fallback
}

// TestLedgerRefillsAWindowTheBackendForgot: the backend admits a window's
// limit, then loses its state (and its epoch marker) while it answers;
// the heartbeat finds the marker changed and the fallback charges the
// backend again what it had admitted, at the times it did, so the window
// is full again and the next call is denied.
func TestLedgerRefillsAWindowTheBackendForgot(t *testing.T) {
	ctx := context.Background()
	backend := newEpochFlaky("ledger-refill")
	l, breaker, fallback := ledgerOf(t, backend)
	const limit = 100
	rule := &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}
	for range limit {
		require.NoError(t, rule.Check(ctx, l, 1, "k"), "the backend admits the limit")
	}
	backend.lose(rule.Name, "k")
	require.Eventually(t, func() bool {
		losses, _, _ := fallback.Restored()
		return losses == 1
	}, time.Minute, time.Millisecond, "the heartbeat finds the loss")
	losses, charged, dropped := fallback.Restored()
	assert.EqualValues(t, 1, losses)
	assert.EqualValues(t, limit, charged, "what the backend had admitted is charged again")
	assert.Zero(t, dropped)
	assert.False(t, breaker.CircuitOpen(), "no breaker opened")
	d, err := l.Allow(ctx, ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "the window is full again")
	assert.Equal(t, ratelimit.SourceBackend, d.Source)

	beats := backend.beats.Load()
	require.Eventually(t, func() bool { return backend.beats.Load() > beats+1 }, time.Minute, time.Millisecond)
	losses, _, _ = fallback.Restored()
	assert.EqualValues(t, 1, losses, "a loss is carried back once")
}

// TestLedgerCarriedBackBeforeTheBreakerCloses: the backend admits some
// calls, goes down (the breaker opens, the fallback admits a few) and
// comes back without its state; the probe that finds it back checks the
// epoch marker and charges the ledger, then the fallback's admissions,
// before the breaker closes: the window admits its limit, no more.
func TestLedgerCarriedBackBeforeTheBreakerCloses(t *testing.T) {
	ctx := context.Background()
	backend := newEpochFlaky("ledger-breaker")
	l, breaker, fallback := ledgerOf(t, backend)
	const limit, before, during = 100, 60, 10
	rule := &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}
	for range before {
		require.NoError(t, rule.Check(ctx, l, 1, "k"))
	}
	backend.down.Store(true)
	for range during {
		a, err := rule.Admit(ctx, l, 1, "k")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
	}
	require.True(t, breaker.CircuitOpen())
	backend.lose(rule.Name, "k")
	backend.down.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "the probe closes the breaker")

	p, err := backend.Peek(ctx, ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.EqualValues(t, limit-before-during, p.Remaining, "the ledger and the fallback's admissions were charged before the breaker closed")
	losses, charged, _ := fallback.Restored()
	assert.EqualValues(t, 1, losses)
	assert.EqualValues(t, before, charged)
	admitted := 0
	for range limit {
		if rule.Check(ctx, l, 1, "k") == nil {
			admitted++
		}
	}
	assert.Equal(t, limit-before-during, admitted, "the window admits its limit in all")
}

// TestLedgerForgetsAReset: a key that the fallback guard resets is
// forgotten by its ledger too, so a loss after the reset charges none of
// what the backend admitted of it before.
func TestLedgerForgetsAReset(t *testing.T) {
	ctx := context.Background()
	backend := newEpochFlaky("ledger-reset")
	l, _, fallback := ledgerOf(t, backend)
	rule := &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 10}}}
	for range 10 {
		require.NoError(t, rule.Check(ctx, l, 1, "k"))
		require.NoError(t, rule.Check(ctx, l, 1, "other"))
	}
	require.NoError(t, l.(ratelimit.Resetter).Reset(ctx, rule.Name, "k"))
	backend.lose(rule.Name, "other")
	require.Eventually(t, func() bool { n, _, _ := fallback.Restored(); return n == 1 }, time.Minute, time.Millisecond)
	_, charged, _ := fallback.Restored()
	assert.EqualValues(t, 10, charged, "only the key not reset is charged again")
	p, err := backend.Peek(ctx, ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.EqualValues(t, 10, p.Remaining, "the reset key stays reset")
}
