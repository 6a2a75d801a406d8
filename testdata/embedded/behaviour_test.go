package embedded

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/embedded/remote"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type client struct{}

func (client) Close() error { return nil }
func (client) Fetch(_ context.Context, url string) (remote.Page, error) {
	return remote.Page{Body: []byte(url)}, nil
}
func (client) Get(_ context.Context, id string) (string, error) { return id, nil }
func (client) Read(p []byte) (int, error)                       { return copy(p, "data"), nil }
func (client) Ping(context.Context) error                       { return nil }

func TestEmbeddedMethodsAreImplementedAndLimited(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		c := NewClientWithRateLimit(client{}, limiter)
		page, err := c.Fetch(context.Background(), "u")
		require.NoError(t, err)
		require.Equal(t, "u", string(page.Body))
		id, err := c.Get(context.Background(), "id")
		require.NoError(t, err)
		require.Equal(t, "id", id)
		require.NoError(t, c.Close())
		require.NoError(t, c.Ping(context.Background()))
		err = c.Ping(context.Background())
		require.ErrorIs(t, err, ratelimit.ErrLimited, "Ping's own directive")

		// Read is limited by Reader's directive under Reader's name, so the
		// Reader decorator and the Client decorator share one limit of 5.
		r := NewReaderWithRateLimit(client{}, limiter)
		buf := make([]byte, 8)
		for range 3 {
			n, err := r.Read(buf)
			require.NoError(t, err)
			require.Equal(t, 4, n)
		}
		for range 2 {
			_, err := c.Read(buf)
			require.NoError(t, err)
		}
		n, err := c.Read(buf)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.Zero(t, n)
	})
}
