package guard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// members is a shared store of heartbeat members, as a backend holds
// them: member → when it stops counting.
type members struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// heart is a Heartbeater on members; name tells processes apart.
type heart struct {
	name string
	ms   *members
}

func (h heart) FleetName() any { return h.name }

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
