package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
)

// TestProxyDelays checks that the proxy forwards commands and that a delay
// makes a round trip take at least twice it (a lower bound, which no slow
// machine can miss), and that without one it forwards again; and that a
// connection to a server that is gone fails.
func TestProxyDelays(t *testing.T) {
	srv, err := redistest.Start()
	require.NoError(t, err)
	defer srv.Stop()
	p, err := startProxy(srv.Addr)
	require.NoError(t, err)
	defer p.close()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 10 * time.Second})
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())

	const d = 50 * time.Millisecond
	p.setDelay(d)
	for range 3 {
		began := time.Now()
		v, err := c.Get(ctx, "k").Result()
		require.NoError(t, err)
		assert.Equal(t, "v", v)
		assert.GreaterOrEqual(t, time.Since(began), 2*d, "a round trip waits the delay each way")
	}
	p.setDelay(0)
	require.NoError(t, c.Ping(ctx).Err())

	srv.Stop()
	fresh := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer fresh.Close()
	assert.Error(t, fresh.Ping(ctx).Err(), "a server that is gone fails the call")
}
