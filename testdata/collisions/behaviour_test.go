package collisions

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	ctxpkg "github.com/ratelimitgen/ratelimitgen/testdata/collisions/context"
	errs "github.com/ratelimitgen/ratelimitgen/testdata/collisions/errors"
	rl "github.com/ratelimitgen/ratelimitgen/testdata/collisions/ratelimit"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type limit int

func (l limit) Limit() int { return int(l) }

// store returns its arguments so the test can see they pass through.
type store struct{}

func (store) Get(next context.Context, limiter string, key int, d rl.Limiter, w ctxpkg.Context) (rl.Config, error) {
	return rl.Config{Burst: key + d.Limit() + len(limiter) + len(w.Tenant)}, nil
}

func (store) Format(ratelimit string, context int, time time.Duration, strconv uint16) (string, error) {
	return ratelimit + time.String(), nil
}

func (store) Code(_ ctxpkg.Context, code errs.Code, err error) (errs.Code, error) {
	return code + 1, err
}

func (store) Unnamed(_ context.Context, s string, n int, b ...byte) (int, error) {
	return len(s) + n + len(b), nil
}

func (store) Blank(context.Context, string, int) (bool, error) { return true, nil }

func (store) Zero(zero, zero1 string) ([2]int, error) {
	return [2]int{len(zero), len(zero1)}, nil
}

func TestCollidingNamesStillWork(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := NewLimitedStore(store{}, limiter)
		cfg, err := s.Get(context.Background(), "ab", 1, limit(10), ctxpkg.Context{Tenant: "xyz"})
		require.NoError(t, err)
		require.Equal(t, rl.Config{Burst: 16}, cfg)
		cfg, err = s.Get(context.Background(), "ab", 1, limit(10), ctxpkg.Context{})
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.Equal(t, rl.Config{}, cfg)
		_, err = s.Get(context.Background(), "ab", 2, limit(10), ctxpkg.Context{})
		require.NoError(t, err, "keyed by key")

		out, err := s.Format("r", 1, time.Second, 9)
		require.NoError(t, err)
		require.Equal(t, "r1s", out)
		_, err = s.Format("r", 1, time.Second, 9)
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "9", le.Key)

		code, err := s.Code(ctxpkg.Context{}, 41, nil)
		require.NoError(t, err)
		require.Equal(t, errs.Code(42), code)
		code, err = s.Code(ctxpkg.Context{}, 41, nil)
		require.ErrorAs(t, err, &le)
		require.Equal(t, "41", le.Key, "an integer is formatted in decimal, not with String")
		require.Zero(t, code)

		n, err := s.Unnamed(context.Background(), "ab", 3, 'x', 'y')
		require.NoError(t, err)
		require.Equal(t, 7, n)
		ok, err := s.Blank(context.Background(), "", 0)
		require.NoError(t, err)
		require.True(t, ok)
		z, err := s.Zero("a", "bb")
		require.NoError(t, err)
		require.Equal(t, [2]int{1, 2}, z)
		z, err = s.Zero("a", "bb")
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.Equal(t, [2]int{}, z)
	})
}

type generic struct{}

func (generic) Get(k int) (string, error) { return "v", nil }

func TestTypeParametersNamedLikeImports(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		g := NewGenericWithRateLimit[string, int](generic{}, limiter)
		v, err := g.Get(1)
		require.NoError(t, err)
		require.Equal(t, "v", v)
		v, err = g.Get(1)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.Empty(t, v)
	})
}

type chain struct{}

func (chain) next() error           { return nil }
func (chain) limiter() (int, error) { return 7, nil }

func TestMethodsNamedLikeFields(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		c := NewChainWithRateLimit(chain{}, limiter)
		require.NoError(t, c.next())
		require.ErrorIs(t, c.next(), ratelimit.ErrLimited)
		n, err := c.limiter()
		require.NoError(t, err)
		require.Equal(t, 7, n)
	})
}

type cacheImpl struct{}

func (cacheImpl) Get() error { return nil }

func TestUnexportedNamesTakeTheNextFreeName(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		c := newCacheWithRateLimit1(cacheImpl{}, limiter)
		require.NoError(t, c.Get())
		require.ErrorIs(t, c.Get(), ratelimit.ErrLimited)
	})
}
