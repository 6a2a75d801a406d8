package guard_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// The tests of this file use only exported API, as a backend written
// outside this module would: flaky is such a backend, an in-process
// limiter that fails on demand.

// errDown is flaky's failure while it is down.
var errDown = errors.New("backend down")

// flaky is a backend that decides in process (ratelimit.NewMemory) and
// fails every call while down, counting the decisions asked of it.
type flaky struct {
	*ratelimit.MemoryLimiter
	down  atomic.Bool
	asked atomic.Int64
	// slow fails the calls as down does while Probe answers: a server
	// that answers, slower than the calls' timeouts.
	slow atomic.Bool
	// carryDown keeps Carry from reaching the backend while Probe does,
	// as a client's pool that still holds an outage's errors does;
	// carries counts the calls of Carry.
	carryDown atomic.Bool
	carries   atomic.Int64
	// nodeAsks counts the calls of NodeOf and ProbeNode, which the guards
	// never make of a backend of one node.
	nodeAsks atomic.Int64
}

// Allow decides req, or fails while the backend is down.
func (f *flaky) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	f.asked.Add(1)
	if f.down.Load() || f.slow.Load() {
		return ratelimit.Decision{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return f.MemoryLimiter.Allow(ctx, req)
}

// Do reserves with Reserve, and passes the other operations on to the
// memory limiter.
func (f *flaky) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	h := ratelimit.Handlers{Next: f.MemoryLimiter, Reserve: f.Reserve}
	return h.Do(ctx, f, &op)
}

// Reserve reserves req, or fails while the backend is down.
func (f *flaky) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	f.asked.Add(1)
	if f.down.Load() {
		return ratelimit.Decision{}, time.Time{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return f.MemoryLimiter.Reserve(ctx, req)
}

// Abilities reports the memory limiter's, offering the guards f itself
// (a guard.Probed and a guard.Carrier).
func (f *flaky) Abilities() ratelimit.Abilities { return offering(f.MemoryLimiter, f) }

// offering returns the abilities of l, offering the guards o: a value
// that implements some of guard.Probed, guard.Carrier and
// guard.Heartbeater.
func offering(l ratelimit.Limiter, o any) ratelimit.Abilities {
	a := l.Abilities()
	a.ForGuards = o
	return a
}

// Node names the backend for a BreakerHook.
func (f *flaky) Node() string { return "flaky" }

// Probe fails while the backend is down.
func (f *flaky) Probe(context.Context) error {
	if f.down.Load() {
		return errDown
	}
	return nil
}

// Unavailable reports whether err is the backend's being down.
func (f *flaky) Unavailable(err error) bool { return errors.Is(err, errDown) }

// PerNode reports false: flaky is one node, with one breaker.
func (f *flaky) PerNode() bool { return false }

// NodeOf fails: flaky has no nodes to tell apart.
func (f *flaky) NodeOf(context.Context, ratelimit.Request, int) (string, error) {
	f.nodeAsks.Add(1)
	return "", fmt.Errorf("flaky is one node: %w", errors.ErrUnsupported)
}

// ProbeNode fails as NodeOf does.
func (f *flaky) ProbeNode(context.Context, string) error {
	f.nodeAsks.Add(1)
	return fmt.Errorf("flaky is one node: %w", errors.ErrUnsupported)
}

// Carry charges what a fallback admitted to the in-process state, at the
// times it was admitted, deciding nothing: a charge on top of a
// reservation made then (ratelimit.OpReserve's Adjust).
func (f *flaky) Carry(ctx context.Context, admissions []guard.Admission) guard.CarryResult {
	var res guard.CarryResult
	f.carries.Add(1)
	for _, a := range admissions {
		if f.down.Load() || f.carryDown.Load() {
			res.Kept = append(res.Kept, a)
			continue
		}
		if err := f.MemoryLimiter.Adjust(ctx, a.Req, a.At, a.Req.Cost); err != nil {
			res.Dropped += a.Req.Cost
			continue
		}
		res.Charged += a.Req.Cost
	}
	return res
}

// sources counts the decisions a hook is told of, by source.
type sources struct {
	mu sync.Mutex
	n  map[ratelimit.Source]int
}

func (s *sources) Decided(_ context.Context, _ *ratelimit.Request, d ratelimit.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[ratelimit.Source]int{}
	}
	s.n[d.Source]++
}

func (s *sources) Failed(context.Context, *ratelimit.Request, error) {}

func (s *sources) count(src ratelimit.Source) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[src]
}

// TestDenyCacheOfAForeignBackendAnswersAsTheBackend: the deny cache around
// a backend of another module repeats its denials, with Source
// SourceCache and told to its hook, deciding every call exactly as a twin
// of the backend that is asked every call.
func TestDenyCacheOfAForeignBackendAnswersAsTheBackend(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewManual()
	hook := &sources{}
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory(ratelimit.WithClock(clock), ratelimit.WithHook(hook))}
	twin := ratelimit.NewMemory(ratelimit.WithClock(clock))
	l := guard.Wrap(backend, guard.WithDenyCache(64))
	algorithms := []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.LeakyBucket}
	calls, cached := 0, 0
	for _, alg := range algorithms {
		req := ratelimit.Request{Name: "foreign." + string(alg), Key: "k", Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 3}}}
		for i := range 400 {
			got, err := l.Allow(ctx, req)
			require.NoError(t, err)
			want, err := twin.Allow(ctx, req)
			require.NoError(t, err)
			calls++
			if got.Source == ratelimit.SourceCache {
				cached++
				got.Source = want.Source
			}
			require.Equal(t, want, got, "%s call %d", alg, i)
			clock.Advance(7 * time.Millisecond)
		}
	}
	t.Logf("%d calls, %d repeated by the cache, %d asked of the backend", calls, cached, backend.asked.Load())
	assert.Greater(t, cached, calls/4, "denials the cache repeated")
	assert.Equal(t, int64(calls-cached), backend.asked.Load(), "the backend decides what the cache does not")
	assert.Equal(t, cached, hook.count(ratelimit.SourceCache), "the hook is told of each repeat")
	cache, ok := guard.Of[*guard.DenyCache](l)
	require.True(t, ok)
	req := ratelimit.Request{Name: "held", Key: "k", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}}
	require.True(t, allow(t, l, req).Allowed)
	require.False(t, allow(t, l, req).Allowed)
	left, ok := cache.CachedDenial(req)
	require.True(t, ok, "the denial is held")
	assert.Equal(t, guard.DefaultDenyHold, left, "held for the deny hold, on the backend's clock")
}

// allow returns l's decision of req.
func allow(t *testing.T, l ratelimit.Limiter, req ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), req)
	require.NoError(t, err)
	return d
}

// TestWrapReportsTheBackendsAbilities: Wrap's limiter reports what the
// backend carries out, and the fallback's decisions, and carries out
// each (through the guards that intercept it).
func TestWrapReportsTheBackendsAbilities(t *testing.T) {
	mem := ratelimit.NewMemory()
	l := guard.Wrap(mem)
	a := l.Abilities()
	for _, k := range []ratelimit.OpKind{ratelimit.OpReserve, ratelimit.OpAdjust, ratelimit.OpTakeSlot, ratelimit.OpPeek, ratelimit.OpReset, ratelimit.OpTurn, ratelimit.OpFallback} {
		assert.True(t, a.Can(k), "%s", k)
	}
	assert.Same(t, mem.Abilities().Config, a.Config, "the backend's Config")
	_, err := l.Do(context.Background(), ratelimit.Op{Kind: ratelimit.OpReset, Request: ratelimit.Request{Name: "x", Key: "k"}})
	require.NoError(t, err)

	plain := guard.Wrap(allowOnly{mem})
	a = plain.Abilities()
	assert.False(t, a.Can(ratelimit.OpReserve), "no reservations around a backend without them")
	assert.False(t, a.Can(ratelimit.OpReset), "no reset around a backend without it")
	_, err = plain.Do(context.Background(), ratelimit.Op{Kind: ratelimit.OpReserve, Request: ratelimit.Request{Name: "x", Key: "k"}})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	_, ok := guard.Of[*guard.DenyCache](plain)
	assert.True(t, ok, "the deny cache is found")
	assert.True(t, a.Can(ratelimit.OpFallback), "the fallback guard decides in process")
	_, ok = guard.Of[*guard.Breaker](plain)
	assert.False(t, ok, "no breaker around a backend that cannot be probed")
	guard.Close(plain)
	guard.Close(l)
}

// allowOnly is a backend that carries out nothing but Allow.
type allowOnly struct{ l ratelimit.Limiter }

func (a allowOnly) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return a.l.Allow(ctx, req)
}

func (a allowOnly) Do(_ context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.Unsupported(a, op.Kind)
}

func (allowOnly) Abilities() ratelimit.Abilities { return ratelimit.Abilities{} }

// TestBreakerOfAForeignBackendOpensAndCloses: the breaker around a backend
// of another module opens after its failures, fails calls at once without
// asking it, probes it, and closes when it is back.
func TestBreakerOfAForeignBackendOpensAndCloses(t *testing.T) {
	ctx := context.Background()
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory()}
	l := guard.Wrap(backend, guard.WithBreaker(3, 10*time.Millisecond, 10*time.Millisecond))
	defer guard.Close(l)
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	req := ratelimit.Request{Name: "flaky", Key: "k", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}}

	backend.down.Store(true)
	for i := range 3 {
		_, err := l.Allow(ctx, req)
		require.ErrorIs(t, err, errDown, "call %d is asked of the backend", i)
	}
	require.True(t, breaker.CircuitOpen())
	asked := backend.asked.Load()
	_, err := l.Allow(ctx, req)
	require.ErrorIs(t, err, ratelimit.ErrCircuitOpen)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	assert.Equal(t, asked, backend.asked.Load(), "an open breaker does not ask the backend")
	assert.Equal(t, []string{"flaky"}, slices.Collect(maps.Keys(breaker.Circuits())), "one breaker: the backend's")

	backend.down.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "the probe closes the breaker")
	d, err := l.Allow(ctx, req)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	require.Eventually(t, func() bool { return !breaker.Probing() }, time.Minute, time.Millisecond)
	assert.Zero(t, backend.nodeAsks.Load(), "a backend of one node (PerNode false) is never asked for a node")
}

// twoNodes is flaky served by two nodes that fail apart, "node-a" for
// the keys that begin with "a" and "node-b" for the others: a backend
// that reports PerNode.
type twoNodes struct {
	*flaky
	downA atomic.Bool
}

// Abilities offers the guards n, whose nodes fail apart.
func (n *twoNodes) Abilities() ratelimit.Abilities { return offering(n.MemoryLimiter, n) }

// PerNode reports true: each node has a breaker of its own.
func (n *twoNodes) PerNode() bool { return true }

// nodeOfKey returns the node that serves key.
func nodeOfKey(key string) string {
	if strings.HasPrefix(key, "a") {
		return "node-a"
	}
	return "node-b"
}

// NodeOf returns the node of req's key.
func (n *twoNodes) NodeOf(_ context.Context, req ratelimit.Request, _ int) (string, error) {
	n.nodeAsks.Add(1)
	return nodeOfKey(req.Key), nil
}

// ProbeNode fails while node is down.
func (n *twoNodes) ProbeNode(_ context.Context, node string) error {
	if node == "node-a" && n.downA.Load() {
		return errDown
	}
	return nil
}

// Allow fails the calls of node-a while it is down.
func (n *twoNodes) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if nodeOfKey(req.Key) == "node-a" && n.downA.Load() {
		n.asked.Add(1)
		return ratelimit.Decision{}, &ratelimit.BackendError{Name: req.Name, Err: errDown}
	}
	return n.flaky.Allow(ctx, req)
}

// TestBreakerPerNodeOfAForeignBackend: around a backend that reports
// PerNode, each node has a breaker of its own, found with NodeOf and
// probed with ProbeNode: a node that is down fails only the calls it
// serves, and the backend's breaker stays closed.
func TestBreakerPerNodeOfAForeignBackend(t *testing.T) {
	ctx := context.Background()
	backend := &twoNodes{flaky: &flaky{MemoryLimiter: ratelimit.NewMemory()}}
	l := guard.Wrap(backend, guard.WithBreaker(3, 10*time.Millisecond, 10*time.Millisecond))
	defer guard.Close(l)
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	limits := []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}
	onA := ratelimit.Request{Name: "nodes", Key: "a1", Limits: limits}
	onB := ratelimit.Request{Name: "nodes", Key: "b1", Limits: limits}

	backend.downA.Store(true)
	for i := range 3 {
		_, err := l.Allow(ctx, onA)
		require.ErrorIs(t, err, errDown, "call %d is asked of node-a", i)
	}
	require.True(t, breaker.NodeOpen("node-a"))
	assert.False(t, breaker.NodeOpen("node-b"))
	assert.False(t, breaker.Down(), "the backend's breaker guards only the look-ups of the nodes")
	assert.Equal(t, []string{"node-a"}, slices.Collect(maps.Keys(breaker.Circuits())))
	asked := backend.asked.Load()
	_, err := l.Allow(ctx, onA)
	require.ErrorIs(t, err, ratelimit.ErrCircuitOpen)
	assert.Equal(t, asked, backend.asked.Load(), "an open breaker of node-a does not ask the backend")
	d, err := l.Allow(ctx, onB)
	require.NoError(t, err, "node-b serves its calls")
	assert.True(t, d.Allowed)

	backend.downA.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "node-a's probe closes its breaker")
	d, err = l.Allow(ctx, onA)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	require.Eventually(t, func() bool { return !breaker.Probing() }, time.Minute, time.Millisecond)
}

// TestBreakerOpensOnlyWhenTheProbeConfirmsTheOutage: calls failing in a
// row do not open the breaker while the backend answers its probe (a slow
// server, a starved client: load, not an outage), nor do calls the
// client was too busy to send (ratelimit.ErrBusy); once the probe fails
// too, the next failures open it.
func TestBreakerOpensOnlyWhenTheProbeConfirmsTheOutage(t *testing.T) {
	ctx := context.Background()
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory()}
	l := guard.Wrap(backend, guard.WithBreaker(3, 10*time.Millisecond, 10*time.Millisecond))
	defer guard.Close(l)
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	req := ratelimit.Request{Name: "flaky", Key: "k", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}}

	backend.slow.Store(true)
	for i := range 20 {
		_, err := l.Allow(ctx, req)
		require.ErrorIs(t, err, errDown, "call %d is asked of the backend", i)
	}
	assert.False(t, breaker.CircuitOpen(), "the backend answers its probe: no outage")

	backend.slow.Store(false)
	busy := &busyBackend{flaky: backend}
	lb := guard.Wrap(busy, guard.WithBreaker(3, 10*time.Millisecond, 10*time.Millisecond))
	defer guard.Close(lb)
	backend.down.Store(true) // the probe fails too, but only busy calls are made
	for range 20 {
		_, err := lb.Allow(ctx, req)
		require.ErrorIs(t, err, ratelimit.ErrBusy)
	}
	bb, _ := guard.Of[*guard.Breaker](lb)
	assert.False(t, bb.CircuitOpen(), "calls the client was too busy to send count neither way")

	for i := 0; !breaker.CircuitOpen(); i++ {
		require.Less(t, i, 3, "3 failures in a row with the probe failing too open the breaker")
		_, err := l.Allow(ctx, req)
		require.ErrorIs(t, err, errDown)
	}
}

// busyBackend is flaky whose calls its client was too busy to send.
type busyBackend struct{ *flaky }

// Abilities offers the guards b, whose Unavailable they call.
func (b *busyBackend) Abilities() ratelimit.Abilities { return offering(b.MemoryLimiter, b) }

// Unavailable takes every error for an outage, as a backend that tells
// none apart would: the breaker itself must not count busy calls.
func (b *busyBackend) Unavailable(error) bool { return true }

// Allow fails as a saturated client does.
func (b *busyBackend) Allow(_ context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, &ratelimit.BackendError{Name: req.Name, Err: fmt.Errorf("%w: pool timeout", ratelimit.ErrBusy)}
}

// TestFallbackOfAForeignBackendDecidesAndCarriesBack: under FailLocal, the
// fallback around a backend of another module decides the calls the
// backend cannot (Source SourceFallback, against the limit), and when the
// breaker's probe finds the backend back, charges what it admitted to the
// backend before the breaker closes, so that the backend denies what the
// fallback used up.
func TestFallbackOfAForeignBackendDecidesAndCarriesBack(t *testing.T) {
	ctx := context.Background()
	hook := &sources{}
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory(ratelimit.WithHook(hook))}
	l := guard.Wrap(backend, guard.WithBreaker(2, 10*time.Millisecond, 10*time.Millisecond), guard.WithFallbackProcesses(1))
	defer guard.Close(l)
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	fallback, ok := guard.Of[*guard.Fallback](l)
	require.True(t, ok)
	const limit = 10
	rule := &ratelimit.Rule{Name: "local", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}

	backend.down.Store(true)
	admitted := 0
	for range 2 * limit {
		if rule.Check(ctx, l, 1, "k") == nil {
			admitted++
		}
	}
	assert.Equal(t, limit, admitted, "the fallback admits the limit")
	assert.True(t, breaker.CircuitOpen())
	assert.Equal(t, limit, fallback.Held(), "its admissions wait to be carried back")
	assert.Positive(t, hook.count(ratelimit.SourceFallback), "its decisions are told to the hook as the fallback's")

	backend.down.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "the probe closes the breaker")
	charged, dropped := fallback.Carried()
	assert.EqualValues(t, limit, charged, "carried back before the breaker closed")
	assert.Zero(t, dropped)
	assert.Zero(t, fallback.Held())
	d, err := l.Allow(ctx, ratelimit.Request{Name: "local", Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "the backend has the fallback's charges: the window is full")
	assert.Equal(t, ratelimit.SourceBackend, d.Source)
}

// TestBreakerStaysOpenUntilCarriedBack: when the probe finds the backend
// back but the fallback cannot carry its admissions back yet (the backend
// answers the probe, not the carry-back), the breaker stays open, so the
// backend decides no call without the fallback's charges; it closes once
// they are carried back.
func TestBreakerStaysOpenUntilCarriedBack(t *testing.T) {
	ctx := context.Background()
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory()}
	l := guard.Wrap(backend, guard.WithBreaker(2, 5*time.Millisecond, 5*time.Millisecond), guard.WithFallbackProcesses(1))
	defer guard.Close(l)
	breaker, _ := guard.Of[*guard.Breaker](l)
	fallback, _ := guard.Of[*guard.Fallback](l)
	const limit = 4
	rule := &ratelimit.Rule{Name: "held", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}

	backend.down.Store(true)
	for range 2 * limit {
		rule.Check(ctx, l, 1, "k")
	}
	require.True(t, breaker.CircuitOpen())
	require.Equal(t, limit, fallback.Held())

	backend.carryDown.Store(true)
	backend.down.Store(false) // the probe finds it back; the carry-back fails
	tried := backend.carries.Load()
	require.Eventually(t, func() bool { return backend.carries.Load() >= tried+3 }, time.Minute, time.Millisecond, "the probes try to carry back")
	assert.True(t, breaker.CircuitOpen(), "open while the fallback's admissions are not carried back")
	asked := backend.asked.Load()
	for range limit {
		rule.Check(ctx, l, 1, "k")
	}
	assert.Equal(t, asked, backend.asked.Load(), "the backend decided no call")

	backend.carryDown.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "the probe carries back, then closes the breaker")
	charged, _ := fallback.Carried()
	assert.EqualValues(t, limit, charged, "carried back before the breaker closed")
	d, err := l.Allow(ctx, ratelimit.Request{Name: rule.Name, Key: "k", Limits: rule.Limits})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "the backend has the fallback's charges: the window is full")
}

// admitWhileDown sets down and has rule admit during calls of key "k"
// through l, each by the fallback, with breaker open.
func admitWhileDown(t *testing.T, l ratelimit.Limiter, rule *ratelimit.Rule, down *atomic.Bool, breaker *guard.Breaker, during int) {
	t.Helper()
	down.Store(true)
	for range during {
		a, err := rule.Admit(context.Background(), l, 1, "k")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
	}
	require.True(t, breaker.CircuitOpen())
}
