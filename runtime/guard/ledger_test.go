package guard_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// markFlaky is flaky with a heartbeat of its own (a fleet of one) that
// keeps the process's marks, as Redis keeps them beside its state: lose
// forgets a key's state and the mark, as a flush or a restart without
// persistence does.
type markFlaky struct {
	flaky
	name    string
	mu      sync.Mutex
	mark    string
	history string
	marks   atomic.Int64
	beats   atomic.Int64
}

func newMarkFlaky(name string) *markFlaky {
	return &markFlaky{flaky: flaky{MemoryLimiter: ratelimit.NewMemory()}, name: name, history: "h0"}
}

func (e *markFlaky) FleetName() any { return e.name }

// Abilities offers the guards e: a guard.Probed, a guard.Carrier and a
// guard.Heartbeater that keeps marks.
func (e *markFlaky) Abilities() ratelimit.Abilities { return offering(e.MemoryLimiter, e) }

// FleetAbilities reports that the backend keeps marks; it does not
// rejoin.
func (e *markFlaky) FleetAbilities() guard.FleetAbilities {
	return guard.FleetAbilities{Marks: true}
}

func (e *markFlaky) Rejoin(context.Context, string, time.Time, time.Time, time.Duration) (int64, error) {
	return 0, errors.ErrUnsupported
}

func (e *markFlaky) Beat(ctx context.Context, member string, now time.Time, ttl time.Duration) (int64, error) {
	n, _, err := e.BeatMark(ctx, member, now, ttl, "")
	return n, err
}

func (e *markFlaky) BeatMark(ctx context.Context, member string, _ time.Time, _ time.Duration, mark string) (int64, []guard.MarkRead, error) {
	reads, err := e.Mark(ctx, member, mark)
	if err != nil {
		return 0, nil, err
	}
	e.beats.Add(1)
	return 1, reads, nil
}

func (e *markFlaky) Mark(_ context.Context, _, mark string) ([]guard.MarkRead, error) {
	if e.down.Load() {
		return nil, errDown
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	read := guard.MarkRead{Before: e.mark, History: e.history}
	if mark != "" {
		e.mark = mark
		e.marks.Add(1)
	}
	return []guard.MarkRead{read}, nil
}

func (e *markFlaky) Leave(context.Context, string) error { return nil }

// lose forgets the state of name and key, and the mark.
func (e *markFlaky) lose(name, key string) {
	_ = e.MemoryLimiter.Reset(context.Background(), name, key)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mark = ""
}

// replica returns the state of name and key that a replica holds now:
// the mark, and how many units the line counts; failover brings it back,
// as a replica promoted with them forgets the writes made after.
func (e *markFlaky) replica(t *testing.T, req ratelimit.Request) (string, int64) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	p, err := e.MemoryLimiter.Peek(context.Background(), req)
	require.NoError(t, err)
	return e.mark, req.Limits[0].Threshold - p.Remaining
}

// failover brings back the state replica returned, as a replica that
// takes over does, under another history: the line counts used units,
// the mark is mark.
func (e *markFlaky) failover(t *testing.T, req ratelimit.Request, mark string, used int64) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx := context.Background()
	require.NoError(t, e.MemoryLimiter.Reset(ctx, req.Name, req.Key))
	if used > 0 {
		at := req
		at.Cost = used
		d, err := e.MemoryLimiter.Allow(ctx, at)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	e.mark = mark
	e.history = "after " + e.history
}

// ledgerOf wraps backend in the guards, with a breaker of short backoffs
// and no WithFallbackProcesses (so the fallback counts its fleet, and
// keeps a ledger), and waits for the heartbeat's first beat, which writes
// the process's first mark.
func ledgerOf(t *testing.T, backend *markFlaky) (ratelimit.Limiter, *guard.Breaker, *guard.Fallback) {
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
// limit, then loses its state (and the process's mark) while it answers;
// the heartbeat finds the mark gone and the fallback charges the backend
// again what it had admitted, at the times it did, so the window is full
// again and the next call is denied.
func TestLedgerRefillsAWindowTheBackendForgot(t *testing.T) {
	ctx := context.Background()
	backend := newMarkFlaky("ledger-refill")
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
// comes back without its state; the probe that finds it back writes the
// process's mark, finds the one before gone, and charges the ledger, then the fallback's admissions,
// before the breaker closes: the window admits its limit, no more.
func TestLedgerCarriedBackBeforeTheBreakerCloses(t *testing.T) {
	ctx := context.Background()
	backend := newMarkFlaky("ledger-breaker")
	l, breaker, fallback := ledgerOf(t, backend)
	const limit, before, during = 100, 60, 10
	rule := &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}
	for range before {
		require.NoError(t, rule.Check(ctx, l, 1, "k"))
	}
	admitWhileDown(t, l, rule, &backend.down, breaker, during)
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
	backend := newMarkFlaky("ledger-reset")
	l, _, fallback := ledgerOf(t, backend)
	rule := &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 10}}}
	for range 10 {
		require.NoError(t, rule.Check(ctx, l, 1, "k"))
		require.NoError(t, rule.Check(ctx, l, 1, "other"))
	}
	require.NoError(t, rule.Reset(ctx, l, "k"))
	backend.lose(rule.Name, "other")
	require.Eventually(t, func() bool { n, _, _ := fallback.Restored(); return n == 1 }, time.Minute, time.Millisecond)
	_, charged, _ := fallback.Restored()
	assert.EqualValues(t, 10, charged, "only the key not reset is charged again")
	p, err := backend.Peek(ctx, ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.EqualValues(t, 10, p.Remaining, "the reset key stays reset")
}

// TestLedgerRefillsWhatAFailoverLost: the backend admits some calls, a
// replica copies its state and the process's mark, the backend admits
// more, and the replica takes over without them; the next mark finds
// the backend answering from another history, and the fallback charges
// again what it admitted after the mark the backend holds: exactly the
// calls the replica missed, none when it missed none.
func TestLedgerRefillsWhatAFailoverLost(t *testing.T) {
	for _, missed := range []int64{3, 0} {
		t.Run(fmt.Sprintf("missed_%d", missed), func(t *testing.T) {
			ctx := context.Background()
			backend := newMarkFlaky("ledger-failover-" + strconv.FormatInt(missed, 10))
			l, breaker, fallback := ledgerOf(t, backend)
			rule := &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Period: time.Hour, Threshold: 100}}}
			req := ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits}
			const cost, before = 10, 4
			for range before {
				require.NoError(t, rule.Check(ctx, l, cost, "k"))
			}
			marks := backend.marks.Load()
			require.Eventually(t, func() bool { return backend.marks.Load() >= marks+2 }, time.Minute, time.Millisecond,
				"a mark is written after the admissions were noted")
			mark, used := backend.replica(t, req)
			require.EqualValues(t, before*cost, used)
			for range missed {
				require.NoError(t, rule.Check(ctx, l, cost, "k"))
			}
			backend.failover(t, req, mark, used)
			require.Eventually(t, func() bool { n, _, _ := fallback.Restored(); return n == 1 }, time.Minute, time.Millisecond,
				"a mark finds the backend answering from another history")
			_, charged, dropped := fallback.Restored()
			assert.EqualValues(t, missed*cost, charged, "what the replica missed is charged again, no more")
			assert.Zero(t, dropped)
			assert.False(t, breaker.CircuitOpen())
			p, err := backend.Peek(ctx, req)
			require.NoError(t, err)
			assert.EqualValues(t, 100-(before+missed)*cost, p.Remaining, "the line counts every admission")
		})
	}
}
