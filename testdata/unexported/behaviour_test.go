package unexported

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type mem map[int64]string

func (m mem) get(_ context.Context, id int64) (string, error) { return m[id], nil }
func (m mem) put(_ context.Context, id int64, v string) error {
	m[id] = v
	return nil
}

func TestUnexportedDecorator(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := newStoreWithRateLimit(mem{}, limiter)
		for i := range 5 {
			require.NoError(t, s.put(context.Background(), 1, strconv.Itoa(i)), "put is not limited")
		}
		v, err := s.get(context.Background(), 1)
		require.NoError(t, err)
		require.Equal(t, "4", v)
		_, err = s.get(context.Background(), 1)
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "1", le.Key)
		_, err = s.get(context.Background(), -1)
		require.NoError(t, err)
	})
}
