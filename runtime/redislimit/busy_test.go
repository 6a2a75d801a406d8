package redislimit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestABusyClientShedsCallsAndOpensNoBreaker: while the client's only
// pooled connection is busy, a call waits the pool timeout, and is then
// shed: denied with a retry and Source busy under every error policy (Redis
// stays the judge of every admission), and no breaker opens however many
// in a row, for Redis answers. Once the connection is free, Redis decides.
func TestABusyClientShedsCallsAndOpensNoBreaker(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	client := redis.NewClient(ClientOptions(&redis.Options{Addr: s.Addr, PoolSize: 1, PoolTimeout: 20 * time.Millisecond}))
	t.Cleanup(func() { client.Close() })
	l := New(client, WithBatching(0))
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	limits := []ratelimit.Limit{{Period: time.Minute, Threshold: 1000}}
	rules := []*ratelimit.Rule{
		{Name: "busy", Limits: limits},
		{Name: "busy", Limits: limits, OnError: ratelimit.FailOpen},
		{Name: "busy", Limits: limits, OnError: ratelimit.FailClosed},
	}
	loadScript(t, ctx, rules[0], l)

	blocked := make(chan error, 1)
	block := func() { go func() { blocked <- client.BLPop(ctx, time.Minute, "nothing").Err() }() }
	block()
	watch := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { watch.Close() })
	require.Eventually(t, func() bool {
		select {
		case err := <-blocked:
			// The BLPOP found the pool's one connection taken, such as
			// by the limiter's heartbeat on a loaded machine, and failed
			// within the pool timeout without reaching Redis: again.
			t.Logf("BLPOP did not reach Redis (%v): again", err)
			block()
			return false
		default:
		}
		list, err := watch.ClientList(ctx).Result()
		return err == nil && strings.Contains(list, "cmd=blpop")
	}, time.Minute, 5*time.Millisecond, "the pool's one connection is busy")

	for i := range 3 * DefaultBreakerFailures {
		for _, r := range rules {
			err := r.Check(ctx, l, 1, "k")
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le, "call %d under %q", i, r.OnError)
			assert.Equal(t, ratelimit.SourceBusy, le.Source)
			assert.Equal(t, ratelimit.BusyRetry, le.RetryAfter)
			assert.Contains(t, le.Error(), "shed undecided")
		}
	}
	assert.Empty(t, l.Circuits(), "the client's own saturation opens no breaker")

	require.NoError(t, watch.LPush(ctx, "nothing", "x").Err())
	require.NoError(t, <-blocked, "the connection is free again")
	d, err := rules[0].Peek(ctx, l, "k")
	require.NoError(t, err)
	assert.Equal(t, ratelimit.SourceBackend, d.Source, "Redis decides again")
	assert.Equal(t, int64(999), d.Remaining, "no shed call was charged")
}

// loadScript has rule admit one call of "k", so that its script is
// loaded: again while the call is shed because the pool's one connection
// was taken (by the limiter's heartbeat, on a loaded machine).
func loadScript(t *testing.T, ctx context.Context, rule *ratelimit.Rule, l *Limiter) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		err := rule.Check(ctx, l, 1, "k")
		var le *ratelimit.LimitError
		if !errors.As(err, &le) || le.Source != ratelimit.SourceBusy || time.Now().After(deadline) {
			require.NoError(t, err, "the script is loaded")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
