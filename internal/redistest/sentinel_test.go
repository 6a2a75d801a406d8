package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSentinelFailsOverAndStops fails a primary over twice, once after a
// crash and once by SENTINEL FAILOVER, and checks that a failover client
// follows.
func TestSentinelFailsOverAndStops(t *testing.T) {
	start := time.Now()
	d, err := StartSentinel(2, 3)
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	t.Cleanup(func() { // before Stop removes them
		if t.Failed() {
			t.Log(d.Logs())
		}
	})
	t.Logf("ready in %s", time.Since(start))
	require.Len(t, d.Addrs(), 3)
	require.Len(t, d.SentinelAddrs(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	primary, err := d.Primary(ctx)
	require.NoError(t, err)
	require.Equal(t, d.Addrs()[0], primary, "the first node starts as the primary")
	c := d.Client()
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	// Replication is asynchronous: a crash loses what the replicas have
	// not acknowledged.
	require.EqualValues(t, 2, c.Wait(ctx, 2, time.Minute).Val())

	old, err := d.KillPrimary(ctx)
	require.NoError(t, err)
	require.Equal(t, primary, old)
	require.Error(t, ping(old), "the primary must be gone after KillPrimary")
	start = time.Now()
	primary, err = d.WaitPrimary(ctx, old)
	require.NoError(t, err)
	t.Logf("failed over after a crash in %s", time.Since(start))
	require.NotEqual(t, old, primary)
	require.Eventually(t, func() bool { return c.Get(ctx, "k").Val() == "v" }, time.Minute, 10*time.Millisecond)
	require.NoError(t, c.Set(ctx, "k", "v2", 0).Err())

	// The failover made the other replica replicate the new primary: once
	// it has caught up, an operator may fail over again.
	start = time.Now()
	require.NoError(t, d.WaitReady(ctx))
	t.Logf("ready again in %s", time.Since(start))
	old, err = d.Failover(ctx)
	require.NoError(t, err)
	require.Equal(t, primary, old)
	start = time.Now()
	primary, err = d.WaitPrimary(ctx, old)
	require.NoError(t, err)
	t.Logf("failed over on request in %s", time.Since(start))
	require.NotEqual(t, old, primary)
	require.Eventually(t, func() bool { return c.Set(ctx, "k", "v3", 0).Err() == nil }, time.Minute, 10*time.Millisecond)
	require.Equal(t, "v3", c.Get(ctx, "k").Val())

	d.Stop()
	for _, addr := range append(d.Addrs(), d.SentinelAddrs()...) {
		require.Error(t, ping(addr), "%s must be gone after Stop", addr)
	}
}

func TestStartSentinelWithoutRedisSentinel(t *testing.T) {
	t.Setenv("REDIS_SENTINEL", "")
	t.Setenv("PATH", t.TempDir())
	_, err := StartSentinel(1, 3)
	require.ErrorContains(t, err, SentinelInstallHint)
}
