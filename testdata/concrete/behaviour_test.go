package concrete

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

func request(id uint32) *Request {
	return &Request{Session: &Session{User: &User{ID: id}}, Query: "q"}
}

func TestLimitedMethodsOfAConcreteType(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := NewServerWithRateLimit(&Server{limiter: "the server's own field"}, limiter)
		for range 2 {
			got, err := s.Search(ctx, request(1))
			require.NoError(t, err)
			require.Equal(t, []string{"Q"}, got)
		}
		_, err := s.Search(ctx, request(1))
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "1", le.Key)
		_, err = s.Search(ctx, request(2))
		require.NoError(t, err, "limited per user")

		require.Equal(t, 3, s.Calls(), "unlimited methods are promoted")
		require.Equal(t, "the server's own field", s.RateLimiter(), "the wrapper's field does not hide the server's")

		// SearchTwice is not limited, and its calls to Search go to *Server
		// directly: the documented self-call caveat.
		for range 3 {
			got, err := s.SearchTwice(ctx, request(1))
			require.NoError(t, err)
			require.Len(t, got, 2)
		}

		v, err := s.Version(&Tenant{Name: "acme"})
		require.NoError(t, err)
		require.Equal(t, "v1 for acme", v)
		_, err = s.Version(&Tenant{Name: "acme"})
		require.ErrorAs(t, err, &le)
		require.Equal(t, "concrete.version", le.Name, "name= overrides the identity")
		require.Equal(t, "acme", le.Key, "keyed by String()")
	})
}

func TestNilPointerOnTheKeyPath(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := NewServerWithRateLimit(&Server{}, limiter)
		for _, tc := range []struct {
			req  *Request
			path string
		}{
			{nil, "req"},
			{&Request{}, "req.Session"},
			{&Request{Session: &Session{}}, "req.Session.User"},
		} {
			got, err := s.Search(ctx, tc.req)
			require.ErrorIs(t, err, ratelimit.ErrNilKey)
			require.ErrorContains(t, err, tc.path+" is nil")
			require.Nil(t, got)
		}
		_, err := s.Version(nil)
		require.ErrorIs(t, err, ratelimit.ErrNilKey)
		require.Zero(t, s.Calls(), "no call reached the server")
	})
}

func TestTypeLevelDirective(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		var n Counter
		c := NewCounterWithRateLimit(&n, limiter)
		for i := range 3 {
			v, err := c.Incr()
			require.NoError(t, err)
			require.Equal(t, i+1, v)
		}
		_, err := c.Incr()
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		v, err := c.Get()
		require.NoError(t, err)
		require.Equal(t, 3, v)
		_, err = c.Get()
		require.ErrorIs(t, err, ratelimit.ErrLimited, "Get's own directive wins over the type's")
	})
}
