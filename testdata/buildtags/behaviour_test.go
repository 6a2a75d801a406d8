//go:build linux || darwin

package buildtags

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type store struct{}

func (store) Get(context.Context) error { return nil }

func TestDecoratorUnderConstraint(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := NewStoreWithRateLimit(store{}, limiter)
		require.NoError(t, s.Get(context.Background()))
		require.ErrorIs(t, s.Get(context.Background()), ratelimit.ErrLimited)
	})
}
