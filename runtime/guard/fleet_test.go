package guard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// members is a shared store of heartbeat members, as a backend holds
// them: member → when it stops counting. unsupported counts the calls of
// what a heart does not do (Rejoin, Mark, BeatMark).
type members struct {
	mu          sync.Mutex
	m           map[string]time.Time
	unsupported atomic.Int64
}

// heart is a Heartbeater on members that only beats; name tells processes
// apart.
type heart struct {
	name string
	ms   *members
}

func (h heart) FleetName() any { return h.name }

// FleetAbilities reports that the heart only beats: it neither rejoins
// nor keeps marks.
func (h heart) FleetAbilities() guard.FleetAbilities { return guard.FleetAbilities{} }

// Rejoin fails: a heart does not rejoin.
func (h heart) Rejoin(context.Context, string, time.Time, time.Time, time.Duration) (int64, error) {
	h.ms.unsupported.Add(1)
	return 0, fmt.Errorf("heart: no rejoin: %w", errors.ErrUnsupported)
}

// Mark fails: a heart keeps no marks.
func (h heart) Mark(context.Context, string, string) ([]guard.MarkRead, error) {
	h.ms.unsupported.Add(1)
	return nil, fmt.Errorf("heart: no marks: %w", errors.ErrUnsupported)
}

// BeatMark fails as Mark does.
func (h heart) BeatMark(context.Context, string, time.Time, time.Duration, string) (int64, []guard.MarkRead, error) {
	h.ms.unsupported.Add(1)
	return 0, nil, fmt.Errorf("heart: no marks: %w", errors.ErrUnsupported)
}

func (h heart) Beat(_ context.Context, member string, now time.Time, ttl time.Duration) (int64, error) {
	h.ms.mu.Lock()
	defer h.ms.mu.Unlock()
	h.ms.m[member] = now.Add(ttl)
	for k, until := range h.ms.m {
		if until.Before(now) {
			delete(h.ms.m, k)
		}
	}
	return int64(len(h.ms.m)), nil
}

func (h heart) Leave(_ context.Context, member string) error {
	h.ms.mu.Lock()
	defer h.ms.mu.Unlock()
	delete(h.ms.m, member)
	return nil
}

// TestFleetCountsProcesses: joins of one fleet name are one process and
// share one heartbeat; joins of two names are two processes; the last
// join to leave removes its process's member.
func TestFleetCountsProcesses(t *testing.T) {
	ms := &members{m: map[string]time.Time{}}
	a, b := guard.JoinFleet(heart{"fleet-test-a", ms}, nil), guard.JoinFleet(heart{"fleet-test-a", ms}, nil)
	defer a.Leave()
	defer b.Leave()
	require.Same(t, a.Fleet(), b.Fleet(), "one heartbeat per name")
	c := guard.JoinFleet(heart{"fleet-test-c", ms}, nil)
	awaitProcesses(t, a.Fleet(), 2)
	awaitProcesses(t, c.Fleet(), 2)
	c.Leave()
	c.Leave() // again: nothing
	ms.mu.Lock()
	_, kept := ms.m[c.Fleet().Member()]
	ms.mu.Unlock()
	assert.False(t, kept, "the last join to leave removes the member")
	beats := c.Fleet().Beats()
	time.Sleep(2 * guard.HeartbeatEvery)
	assert.Equal(t, beats, c.Fleet().Beats(), "no beat after the last Leave")
	assert.Zero(t, ms.unsupported.Load(), "a heart that only beats is asked only to beat and leave")
}

// awaitProcesses waits until f counts n processes.
func awaitProcesses(t *testing.T, f *guard.Fleet, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.Processes() != n {
		require.True(t, time.Now().Before(deadline), "counted %d processes, not %d", f.Processes(), n)
		time.Sleep(10 * time.Millisecond)
	}
}

// fleetFlaky is flaky in a fleet of its own (a heart) that reports can:
// Rejoin, Mark and BeatMark answer when it reports them, as a backend
// that rejoins and keeps marks does, and otherwise fail wrapping
// errors.ErrUnsupported, as a heart's do. rejoins and marks count the
// calls of Rejoin, and of Mark and BeatMark, either way.
type fleetFlaky struct {
	*flaky
	heart
	can            guard.FleetAbilities
	rejoins, marks atomic.Int64
	mu             sync.Mutex
	back           map[string]time.Time
	mark           string
}

func (e *fleetFlaky) FleetAbilities() guard.FleetAbilities { return e.can }

// Abilities offers the guards e: a guard.Probed, a guard.Carrier and a
// guard.Heartbeater.
func (e *fleetFlaky) Abilities() ratelimit.Abilities { return offering(e.MemoryLimiter, e) }

// Rejoin marks member back at now and counts those back since.
func (e *fleetFlaky) Rejoin(ctx context.Context, member string, now, since time.Time, ttl time.Duration) (int64, error) {
	e.rejoins.Add(1)
	if !e.can.Rejoins {
		return e.heart.Rejoin(ctx, member, now, since, ttl)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.back[member] = now
	n := int64(0)
	for _, at := range e.back {
		if !at.Before(since) {
			n++
		}
	}
	return n, nil
}

// Mark stores mark and reads the one before.
func (e *fleetFlaky) Mark(ctx context.Context, member, mark string) ([]guard.MarkRead, error) {
	e.marks.Add(1)
	if !e.can.Marks {
		return e.heart.Mark(ctx, member, mark)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	read := guard.MarkRead{Before: e.mark, History: "h"}
	e.mark = mark
	return []guard.MarkRead{read}, nil
}

// BeatMark beats and marks.
func (e *fleetFlaky) BeatMark(ctx context.Context, member string, now time.Time, ttl time.Duration, mark string) (int64, []guard.MarkRead, error) {
	if !e.can.Marks {
		e.marks.Add(1)
		return e.heart.BeatMark(ctx, member, now, ttl, mark)
	}
	reads, err := e.Mark(ctx, member, mark)
	if err != nil {
		return 0, nil, err
	}
	n, err := e.Beat(ctx, member, now, ttl)
	return n, reads, err
}

// TestFleetAbilitiesAreWhatTheBackendReports: the guards ask a
// Heartbeater to rejoin, and keep a ledger checked by its marks, only
// when it reports it (FleetAbilities), never to learn it from an error: a
// backend that only beats goes through an outage and its recovery, and
// CheckMarks, without a call of Rejoin, Mark or BeatMark, and its fallback
// carries back and charges nothing again, as a Heartbeater that was not a
// Rejoiner or Marker did; one that reports both is asked both.
func TestFleetAbilitiesAreWhatTheBackendReports(t *testing.T) {
	for name, can := range map[string]guard.FleetAbilities{
		"beats_only":        {},
		"rejoins_and_marks": {Rejoins: true, Marks: true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ms := &members{m: map[string]time.Time{}}
			backend := &fleetFlaky{flaky: &flaky{MemoryLimiter: ratelimit.NewMemory()}, heart: heart{"fleet-abilities-" + name, ms}, can: can, back: map[string]time.Time{}}
			l := guard.Wrap(backend, guard.WithBreaker(2, 5*time.Millisecond, 5*time.Millisecond))
			t.Cleanup(func() { guard.Close(l) })
			breaker, _ := guard.Of[*guard.Breaker](l)
			fallback, _ := guard.Of[*guard.Fallback](l)
			require.Eventually(t, func() bool { return fallback.Fleet().Beats() > 0 }, time.Minute, time.Millisecond, "the heartbeat beats")
			const limit, during = 10, 4
			rule := &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: limit}}, OnError: ratelimit.FailLocal}

			admitWhileDown(t, l, rule, &backend.down, breaker, during)
			backend.down.Store(false)
			require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond, "the probe closes the breaker")
			charged, _ := fallback.Carried()
			assert.EqualValues(t, during, charged, "carried back before the breaker closed")
			lost, err := fallback.CheckMarks(ctx)
			require.NoError(t, err)
			assert.False(t, lost)
			beats := fallback.Fleet().Beats()
			require.Eventually(t, func() bool { return fallback.Fleet().Beats() > beats }, time.Minute, time.Millisecond, "the heartbeat beats again")

			losses, restored, _ := fallback.Restored()
			assert.Zero(t, losses+restored, "nothing is charged again")
			assert.Equal(t, can.Rejoins, backend.rejoins.Load() > 0, "Rejoin is called when the backend reports Rejoins, only then")
			assert.Equal(t, can.Marks, backend.marks.Load() > 0, "Mark and BeatMark are called when the backend reports Marks, only then")
			if !can.Rejoins && !can.Marks {
				assert.Zero(t, ms.unsupported.Load(), "no call learns what a backend does not do from its error")
			}
		})
	}
}
