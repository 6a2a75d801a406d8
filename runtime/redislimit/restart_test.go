package redislimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// replica is one process of a service sharing a Redis: a limiter on a
// client of go-redis's defaults, called by goroutines without pause.
type replica struct {
	l       *Limiter
	metrics *limitmetrics.Metrics
	// okSince counts the calls Redis decided in a row; firstOK is when
	// the first of them came after mark (0 before).
	okInRow atomic.Int64
	mark    atomic.Int64
	firstOK atomic.Int64
}

func (r *replica) call(ctx context.Context) {
	d, err := r.l.Allow(ctx, recoveryReq)
	if err != nil || d.Source != ratelimit.SourceBackend {
		r.okInRow.Store(0)
		return
	}
	r.okInRow.Add(1)
	now := time.Now().UnixNano()
	if mark := r.mark.Load(); mark != 0 && now > mark {
		r.firstOK.CompareAndSwap(0, now)
	}
}

// opened returns how many times the replica's breaker opened.
func (r *replica) opened() uint64 {
	var n uint64
	for _, b := range r.metrics.Breakers() {
		n += b.Opened
	}
	return n
}

// TestRestartsReopenNoBreaker: three replicas share a Redis that is
// restarted again and again while they call it. Each restart opens each
// replica's breaker once; once its probe finds Redis back and closes it,
// the errors of the client's pool from before the restart (go-redis
// answers "connection refused" without dialling for up to a second after
// PoolSize failed dials) must not open it again: 0 reopenings. It logs
// the reopenings per restart and how long after Redis was back every
// replica decided by Redis again (docs/reliability.md quotes them); it
// asserts no duration.
func TestRestartsReopenNoBreaker(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a redis-server several times")
	}
	const replicas, restarts = 3, 5
	s, err := redistest.Start()
	require.NoError(t, err)
	addr := s.Addr
	t.Cleanup(func() { s.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	rs := make([]*replica, replicas)
	for i := range rs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		r := &replica{metrics: &limitmetrics.Metrics{}}
		r.l = New(c, ratelimit.WithHook(r.metrics))
		t.Cleanup(func() { r.l.Close() })
		rs[i] = r
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					r.call(ctx)
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	// settled waits until every replica's calls have been decided by
	// Redis 50 times in a row: its breaker closed, its pool serving.
	settled := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			return !slices.ContainsFunc(rs, func(r *replica) bool { return r.okInRow.Load() < 50 })
		}, time.Minute, 5*time.Millisecond, "every replica decides by Redis again")
	}
	settled()

	var reopened []uint64
	var backAfter []time.Duration
	for range restarts {
		before := make([]uint64, replicas)
		for i, r := range rs {
			before[i] = r.opened()
			r.mark.Store(0)
			r.firstOK.Store(0)
		}
		s.Stop()
		require.Eventually(t, func() bool {
			return !slices.ContainsFunc(rs, func(r *replica) bool { return r.opened() == before[slices.Index(rs, r)] })
		}, time.Minute, time.Millisecond, "the outage opens every breaker")
		time.Sleep(300 * time.Millisecond) // an outage, during which the callers keep failing
		s, err = redistest.StartOn(addr)
		require.NoError(t, err)
		back := time.Now()
		for _, r := range rs {
			r.mark.Store(back.UnixNano())
		}
		settled()
		var reopenings uint64
		var slowest time.Duration
		for i, r := range rs {
			reopenings += r.opened() - before[i] - 1
			slowest = max(slowest, time.Duration(r.firstOK.Load()-back.UnixNano()))
		}
		reopened = append(reopened, reopenings)
		backAfter = append(backAfter, slowest)
	}
	t.Logf("reopenings per restart (of %d replicas): %v", replicas, reopened)
	t.Logf("every replica decided by Redis again after: %v", fmt.Sprint(backAfter))
	for i, n := range reopened {
		assert.Zero(t, n, "restart %d: a breaker reopened after its probe found Redis back", i+1)
	}
}
