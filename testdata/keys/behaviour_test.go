package keys

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
	"github.com/ratelimitgen/ratelimitgen/testdata/keys/auth"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// api counts the calls that reach it.
type api struct{ calls int }

func (a *api) ByPrincipal(context.Context) error      { a.calls++; return nil }
func (a *api) ByAuth(context.Context) (string, error) { a.calls++; return "ok", nil }
func (a *api) ByTenant(context.Context, *Req) error   { a.calls++; return nil }
func (a *api) ByID(context.Context, *string) error    { a.calls++; return nil }
func (a *api) ByNumber(context.Context, *int64) error { a.calls++; return nil }
func (a *api) Strict(context.Context) error           { a.calls++; return nil }
func (a *api) Upload(context.Context, *Req) error     { a.calls++; return nil }
func (a *api) Weigh(context.Context, *Req) error      { a.calls++; return nil }
func (a *api) BySecret(context.Context, string) error { a.calls++; return nil }

// each runs f on every backend with a fresh decorated api.
func each(t *testing.T, f func(t *testing.T, a *api, d *APIWithRateLimit)) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		a := &api{}
		f(t, a, NewAPIWithRateLimit(a, limiter))
	})
}

func ctxOf(principal string) context.Context { return auth.With(context.Background(), principal) }

func ptr[T any](v T) *T { return &v }

func admitted(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err)
}

// denied checks that err is a denial under key.
func denied(t *testing.T, err error, key string) {
	t.Helper()
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, key, le.Key)
}

func TestKeyFromAFunctionOfThePackage(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		admitted(t, d.ByPrincipal(ctxOf("ann")))
		admitted(t, d.ByPrincipal(ctxOf("ann")))
		denied(t, d.ByPrincipal(ctxOf("ann")), "ann")
		admitted(t, d.ByPrincipal(ctxOf("bob")))
		require.Equal(t, 3, a.calls)
	})
}

func TestAFailingKeyFunctionFailsTheCallUncharged(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		for range 3 {
			_, err := d.ByAuth(context.Background())
			require.ErrorIs(t, err, auth.ErrNoPrincipal, "onerror=allow does not let it through")
			require.NotErrorIs(t, err, ratelimit.ErrLimited)
		}
		require.Zero(t, a.calls)
		for range 2 {
			out, err := d.ByAuth(ctxOf("ann"))
			require.NoError(t, err, "the failed calls were not charged")
			require.Equal(t, "ok", out)
		}
		_, err := d.ByAuth(ctxOf("ann"))
		denied(t, err, "ann")
	})
}

func TestKeyFromAStringerOfTwoArguments(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		req := &Req{Org: &Org{ID: "acme"}}
		admitted(t, d.ByTenant(ctxOf("ann"), req))
		denied(t, d.ByTenant(ctxOf("ann"), req), "acme/ann")
		admitted(t, d.ByTenant(ctxOf("bob"), req))
		require.ErrorIs(t, d.ByTenant(ctxOf("ann"), nil), ratelimit.ErrNilKey)
	})
}

func TestPointerKeys(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		admitted(t, d.ByID(context.Background(), ptr("x")))
		denied(t, d.ByID(context.Background(), ptr("x")), "x")
		require.ErrorIs(t, d.ByID(context.Background(), nil), ratelimit.ErrNilKey)
		admitted(t, d.ByNumber(context.Background(), ptr(int64(-7))))
		denied(t, d.ByNumber(context.Background(), ptr(int64(-7))), "-7")
		require.ErrorIs(t, d.ByNumber(context.Background(), nil), ratelimit.ErrNilKey)
		require.Equal(t, 2, a.calls)
	})
}

func TestEmptyKeyDenied(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		for range 3 {
			err := d.Strict(context.Background())
			require.ErrorIs(t, err, ratelimit.ErrEmptyKey)
			require.NotErrorIs(t, err, ratelimit.ErrLimited)
		}
		admitted(t, d.Strict(ctxOf("ann")))
		denied(t, d.Strict(ctxOf("ann")), "ann")
		// Without emptykey=deny, "" is a key like any other.
		admitted(t, d.ByPrincipal(context.Background()))
		admitted(t, d.ByPrincipal(context.Background()))
		denied(t, d.ByPrincipal(context.Background()), "")
	})
}

func TestCostsFromAPathAndAFunction(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		admitted(t, d.Upload(context.Background(), &Req{Size: 6}))
		denied(t, d.Upload(context.Background(), &Req{Size: 5}), "")
		admitted(t, d.Upload(context.Background(), &Req{Size: 4}))
		require.ErrorIs(t, d.Upload(context.Background(), nil), ratelimit.ErrNilKey)

		require.ErrorIs(t, d.Weigh(context.Background(), &Req{Size: 101}), errTooLarge)
		admitted(t, d.Weigh(context.Background(), &Req{Size: 10}))
		denied(t, d.Weigh(context.Background(), &Req{Size: 1}), "")
	})
}

type generic struct{}

func (generic) ByString(string) error { return nil }
func (generic) ByNumber(int32) error  { return nil }

type name string

type namedGeneric struct{}

func (namedGeneric) ByString(name) error  { return nil }
func (namedGeneric) ByNumber(int64) error { return nil }

func TestTypeParameterKeys(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		g := NewGenericWithRateLimit[string, int32](generic{}, limiter)
		admitted(t, g.ByString("a"))
		denied(t, g.ByString("a"), "a")
		admitted(t, g.ByNumber(-3))
		denied(t, g.ByNumber(-3), "-3")
		n := NewGenericWithRateLimit[name, int64](namedGeneric{}, limiter)
		denied(t, n.ByString("a"), "a")
		admitted(t, n.ByNumber(9))
	})
}

// TestASecretKeyIsLimitedUnderItsDigest: under keyhash=true a denial, and
// Redis, name the digest of the key, never the key.
func TestASecretKeyIsLimitedUnderItsDigest(t *testing.T) {
	const secret = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		a := &api{}
		d := NewAPIWithRateLimit(a, limiter)
		require.ErrorIs(t, d.BySecret(context.Background(), ""), ratelimit.ErrEmptyKey, "checked before the digest")
		admitted(t, d.BySecret(context.Background(), secret))
		err := d.BySecret(context.Background(), secret)
		denied(t, err, ratelimit.KeyDigest(secret))
		require.NotContains(t, err.Error(), secret)
		admitted(t, d.BySecret(context.Background(), "sk_live_other"))
		require.Equal(t, 2, a.calls)
		if _, ok := limiter.(*redislimit.Limiter); ok {
			client := srv.Client()
			defer client.Close()
			keys, err := client.Keys(context.Background(), "*").Result()
			require.NoError(t, err)
			require.NotEmpty(t, keys)
			for _, k := range keys {
				require.NotContains(t, k, secret)
			}
			require.Contains(t, strings.Join(keys, " "), ratelimit.KeyDigest(secret))
		}
	})
}
