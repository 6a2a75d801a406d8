package redistest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartOnReusesAStoppedServersAddress(t *testing.T) {
	s, err := Start()
	require.NoError(t, err)
	addr := s.Addr
	s.Stop()
	require.Error(t, ping(addr))

	s, err = StartOn(addr)
	require.NoError(t, err)
	defer s.Stop()
	require.Equal(t, addr, s.Addr)
	c := s.Client()
	defer c.Close()
	require.NoError(t, c.Ping(context.Background()).Err())

	_, err = StartOn(addr)
	require.Error(t, err, "the port is taken")
}
