package redistest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartAnswersAndStops(t *testing.T) {
	s, err := Start()
	require.NoError(t, err)
	c := s.Client()
	defer c.Close()
	require.NoError(t, c.Set(context.Background(), "k", "v", 0).Err())
	require.Equal(t, "v", c.Get(context.Background(), "k").Val())
	s.Stop()
	require.Error(t, ping(s.Addr), "server must be gone after Stop")
}

// TestStartReportsAServerThatExits: a server that exits at once (here on a
// config line it does not know) is reported as exited, not waited for
// until the readiness deadline.
func TestStartReportsAServerThatExits(t *testing.T) {
	_, err := Start("no-such-directive yes")
	require.ErrorContains(t, err, "exited")
	require.ErrorContains(t, err, "no-such-directive")
}
