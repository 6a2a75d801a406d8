package guard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestGuardsOfQueuesAndCooldowns: the guards see a waiting call's tries
// and a cooldown's read as they see Allow: while the breaker of a foreign
// backend is open, a try in turn is refused as a reservation would be
// (not asking the backend), a count of the queue is declined (the calls
// wait in their process's order) and a cooldown's read fails at once;
// once it closed, each reaches the backend again. A call with a leased
// line waits in its process's order: the lease guard declines its queue.
func TestGuardsOfQueuesAndCooldowns(t *testing.T) {
	ctx := context.Background()
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory()}
	l := guard.Wrap(backend, guard.WithBreaker(1, 10*time.Millisecond, 10*time.Millisecond))
	defer guard.Close(l)
	breaker, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	req := ratelimit.Request{Name: "queued", Key: "k", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 5, Cooldown: true}}}
	turn := ratelimit.Op{Kind: ratelimit.OpTurn, Request: req, Wait: time.Minute}

	backend.down.Store(true)
	_, err := l.Allow(ctx, req)
	require.ErrorIs(t, err, errDown)
	require.True(t, breaker.CircuitOpen())
	asked := backend.asked.Load()
	_, err = l.Do(ctx, turn)
	require.ErrorIs(t, err, ratelimit.ErrCircuitOpen, "a try in turn, refused as a reservation")
	assert.Equal(t, asked, backend.asked.Load(), "the open breaker did not ask the backend")
	_, err = l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpWaiting, Request: req})
	require.ErrorIs(t, err, errors.ErrUnsupported, "the queue's count, declined")
	_, err = l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpCooling, Request: req})
	require.ErrorIs(t, err, ratelimit.ErrCircuitOpen, "a cooldown's read")

	backend.down.Store(false)
	require.Eventually(t, func() bool { return !breaker.CircuitOpen() }, time.Minute, time.Millisecond)
	res, err := l.Do(ctx, turn)
	require.NoError(t, err)
	assert.True(t, res.Decision.Allowed, "the backend decides the try once the breaker closed")
	_, err = l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpWaiting, Request: req})
	require.NoError(t, err)

	leased := req
	leased.Limits = []ratelimit.Limit{{Period: time.Hour, Threshold: 100, Prefetch: time.Second}}
	_, err = l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTurn, Request: leased, Wait: time.Minute})
	require.ErrorIs(t, err, errors.ErrUnsupported, "a leased line's queue, declined")
}
