package redistest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClusterFormsServesAndStops(t *testing.T) {
	c, err := StartCluster(3)
	require.NoError(t, err)
	defer c.Stop()
	require.Len(t, c.Addrs(), 3)
	ctx := context.Background()

	cl := c.Client()
	defer cl.Close()
	// Keys in many slots are routed to every master.
	for i := range 50 {
		k := fmt.Sprintf("k%d", i)
		require.NoError(t, cl.Set(ctx, k, k, 0).Err())
		require.Equal(t, k, cl.Get(ctx, k).Val())
	}
	for _, s := range c.nodes {
		sc := s.Client()
		n, err := sc.DBSize(ctx).Result()
		sc.Close()
		require.NoError(t, err)
		require.NotZero(t, n, "node %s holds none of the keys", s.Addr)
	}

	c.Kill(2)
	require.Error(t, ping(c.Addrs()[2]), "node must be gone after Kill")
	c.Flush(t) // skips the killed node
	for _, s := range c.nodes[:2] {
		sc := s.Client()
		n, err := sc.DBSize(ctx).Result()
		sc.Close()
		require.NoError(t, err)
		require.Zero(t, n, "Flush must empty node %s", s.Addr)
	}

	c.Stop()
	for _, addr := range c.Addrs() {
		require.Error(t, ping(addr), "node %s must be gone after Stop", addr)
	}
}

func TestStartClusterWithoutRedisCLI(t *testing.T) {
	t.Setenv("REDIS_CLI", "")
	t.Setenv("PATH", t.TempDir())
	_, err := StartCluster(3)
	require.ErrorContains(t, err, CLIInstallHint)
}

func TestStartClusterNeedsThreeMasters(t *testing.T) {
	_, err := StartCluster(2)
	require.ErrorContains(t, err, "at least 3 masters")
}
