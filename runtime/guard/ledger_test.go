package guard_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
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
