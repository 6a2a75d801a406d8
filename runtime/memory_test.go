package ratelimit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

func TestMemoryKeysAreBounded(t *testing.T) {
	clock := newManualClock()
	const max = 1000
	l := NewMemory(WithClock(clock), WithMaxKeys(max))
	lim := []Limit{{Period: time.Hour, Threshold: 1}}
	for i := range 100_000 {
		allow(t, l, Request{Name: "stream", Key: fmt.Sprint(i), Limits: lim})
	}
	// Each shard holds at most max/shardCount+1 entries.
	assert.LessOrEqual(t, l.Len(), max+shardCount)
	assert.Greater(t, l.Len(), max/2)
}

func TestMemoryDropsIdleKeys(t *testing.T) {
	clock := newManualClock()
	l := NewMemory(WithClock(clock))
	lim := []Limit{{Period: time.Second, Threshold: 1}}
	for i := range 10_000 {
		allow(t, l, Request{Name: "idle", Key: fmt.Sprint(i), Limits: lim})
	}
	clock.Advance(2 * time.Second)
	for i := range 10_000 {
		allow(t, l, Request{Name: "fresh", Key: fmt.Sprint(i), Limits: lim})
	}
	// Every new key sweeps a few expired ones, so the idle ones mostly went.
	assert.Less(t, l.Len(), 15_000)
}

// TestMemoryDropsIdleKeysOfEveryAlgorithm: a pair whose state no longer
// matters (its window ended, its bucket drained) is dropped as new pairs
// arrive, and one that still matters is kept.
func TestMemoryDropsIdleKeysOfEveryAlgorithm(t *testing.T) {
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			clock := newManualClock()
			l := NewMemory(WithClock(clock))
			lim := []Limit{{Algorithm: alg, Period: time.Second, Threshold: 1}}
			for i := range 5_000 {
				allow(t, l, Request{Name: "idle", Key: fmt.Sprint(i), Limits: lim})
			}
			keep := []Limit{{Algorithm: alg, Period: time.Hour, Threshold: 1}}
			allow(t, l, Request{Name: "busy", Limits: keep})
			clock.Advance(3 * time.Second)
			for i := range 5_000 {
				allow(t, l, Request{Name: "fresh", Key: fmt.Sprint(i), Limits: lim})
			}
			assert.Less(t, l.Len(), 8_000, "most idle pairs went")
			assert.False(t, allow(t, l, Request{Name: "busy", Limits: keep}).Allowed, "the busy pair kept its state")
		})
	}
}

// TestPairsOfOneHashKeepTheirOwnState: two (name, key) pairs whose hashes
// collide share a map slot but never a state, and forgetting one keeps
// the other.
func TestPairsOfOneHashKeepTheirOwnState(t *testing.T) {
	var s memoryShard
	s.entries = map[uint64]*memoryEntry{}
	const hash = 42
	a := s.entry("svc.Get", "alice", hash, 1, 0, 100)
	b := s.entry("svc.Get", "bob", hash, 1, 0, 100)
	c := s.entry("svc.Put", "alice", hash, 1, 0, 100)
	require.NotSame(t, a, b)
	require.NotSame(t, a, c)
	require.NotSame(t, b, c)
	assert.Same(t, a, s.entry("svc.Get", "alice", hash, 1, 0, 100))
	assert.Len(t, s.entries, 1, "one slot, chained")

	s.remove("svc.Get", "bob", hash)
	assert.Nil(t, s.find("svc.Get", "bob", hash))
	assert.Same(t, a, s.find("svc.Get", "alice", hash))
	assert.Same(t, c, s.find("svc.Put", "alice", hash))
	s.remove("svc.Get", "alice", hash)
	s.remove("svc.Put", "alice", hash)
	assert.Empty(t, s.entries, "the last pair's removal frees the slot")
}

// TestMemoryKeepsBoundedKeys: the memory limiter keeps a long key as its
// bounded stand-in, whatever its algorithm.
func TestMemoryKeepsBoundedKeys(t *testing.T) {
	l := NewMemory(WithClock(newManualClock()))
	long := []string{strings.Repeat("A", 1<<20), strings.Repeat(":", 1<<20), strings.Repeat(":", 1<<20-1) + "B"}
	for _, k := range long {
		for _, alg := range Algorithms() {
			req := Request{Name: string(alg), Key: k, Limits: []Limit{{Algorithm: alg, Period: time.Hour, Threshold: 1}}}
			require.True(t, allow(t, l, req).Allowed, "%s: %.10q shares another key's state", alg, k)
		}
	}
	n := 0
	for i := range l.shards {
		for _, e := range l.shards[i].entries {
			for ; e != nil; e = e.next {
				assert.LessOrEqual(t, len(e.key), callkey.MaxStandIn, "%.80q", e.key)
				n++
			}
		}
	}
	assert.Equal(t, len(Algorithms())*len(long), n)
}
