package generics

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

var ctx = context.Background()

type repo struct{ puts [][]int }

func (r *repo) Get(_ context.Context, tenant string, key string) (int, error) {
	return len(tenant) + len(key), nil
}

func (r *repo) Put(_ context.Context, _ string, values ...int) (int, error) {
	r.puts = append(r.puts, values)
	return len(values), nil
}

func (r *repo) Keys(context.Context) ([]string, error) { return []string{"k"}, nil }

func TestGenericInterface(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		r := &repo{}
		d := NewRepoWithRateLimit[string, int](r, limiter)
		var _ Repo[string, int] = d
		for range 3 {
			n, err := d.Get(ctx, "acme", "key")
			require.NoError(t, err)
			require.Equal(t, 7, n)
		}
		n, err := d.Get(ctx, "acme", "key")
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.Zero(t, n)
		_, err = d.Get(ctx, "other", "key")
		require.NoError(t, err, "limited per tenant")

		n, err = d.Put(ctx, "k", 1, 2, 3)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		n, err = d.Put(ctx, "k")
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, [][]int{{1, 2, 3}, nil}, r.puts, "variadic arguments pass through")
		_, err = d.Put(ctx, "k", 4)
		require.ErrorIs(t, err, ratelimit.ErrLimited)

		for range 5 {
			keys, err := d.Keys(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"k"}, keys)
		}
	})
}

type ints []int

func (s ints) Len() int { return len(s) }

type summer struct{}

func (summer) Sum(s ints) (int, error) {
	total := 0
	for _, v := range s {
		total += v
	}
	return total, nil
}

type label string

func (l label) String() string { return "label:" + string(l) }

type labeler struct{}

func (labeler) Label(l label, m int) ([]int, error) { return []int{m}, nil }

func TestConstraintsAndStringerTypeParameter(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := NewSummerWithRateLimit[int, ints](summer{}, limiter)
		for range 5 {
			v, err := s.Sum(ints{1, 2, 3})
			require.NoError(t, err)
			require.Equal(t, 6, v)
		}
		_, err := s.Sum(ints{1})
		require.ErrorIs(t, err, ratelimit.ErrLimited)

		l := NewLabelerWithRateLimit[label, int](labeler{}, limiter)
		got, err := l.Label("a", 4)
		require.NoError(t, err)
		require.Equal(t, []int{4}, got)
		_, err = l.Label("a", 5)
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "label:a", le.Key, "keyed by String()")
		_, err = l.Label("b", 6)
		require.NoError(t, err)
	})
}

func TestGenericConcreteType(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		c := NewCacheWithRateLimit(NewCache[string, float64](), limiter)
		c.Store("pi", 3.14) // promoted, not limited
		for range 2 {
			v, ok, err := c.Load("pi")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, 3.14, v)
		}
		v, ok, err := c.Load("pi")
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.False(t, ok)
		require.Zero(t, v)
	})
}
