package getters

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/getters/tenancy"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// api counts the calls that reach it.
type api struct{ calls int }

func (a *api) ByWarehouse(context.Context, *Request) error       { a.calls++; return nil }
func (a *api) ByTenant(context.Context, *Request) error          { a.calls++; return nil }
func (a *api) Reserve(context.Context, *Request) error           { a.calls++; return nil }
func (a *api) ReserveByPriority(context.Context, *Request) error { a.calls++; return nil }
func (a *api) Label(context.Context, map[string]string) error    { a.calls++; return nil }
func (a *api) Note(context.Context, string) error                { a.calls++; return nil }
func (a *api) Book(context.Context, [3]string) error             { a.calls++; return nil }
func (a *api) ByCaller(context.Context) error                    { a.calls++; return nil }
func (a *api) Weighted(context.Context, *Request) error          { a.calls++; return nil }
func (a *api) ByPlain(context.Context, *Plain) error             { a.calls++; return nil }

// each runs f on every backend with a fresh decorated api.
func each(t *testing.T, f func(t *testing.T, a *api, d *APIWithRateLimit)) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		a := &api{}
		f(t, a, NewAPIWithRateLimit(a, limiter))
	})
}

var ctx = context.Background()

// denied checks that err is a denial under key.
func denied(t *testing.T, err error, key string) {
	t.Helper()
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	require.Equal(t, key, le.Key)
}

func TestAGetterKeysTheCall(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		east := &Request{Warehouse: "east"}
		require.NoError(t, d.ByWarehouse(ctx, east))
		require.NoError(t, d.ByWarehouse(ctx, east))
		denied(t, d.ByWarehouse(ctx, east), "east")
		// A nil request has the warehouse "", as its getter says.
		require.NoError(t, d.ByWarehouse(ctx, nil))
		require.NoError(t, d.ByWarehouse(ctx, &Request{}))
		denied(t, d.ByWarehouse(ctx, nil), "")
		require.Equal(t, 4, a.calls)
	})
}

func TestChainedGettersAreNilSafe(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		for _, req := range []*Request{nil, {}, {Order: &Order{}}} {
			require.ErrorIs(t, d.ByTenant(ctx, req), ratelimit.ErrEmptyKey, "emptykey=deny")
		}
		acme := &Request{Order: &Order{Tenant: "acme"}}
		require.NoError(t, d.ByTenant(ctx, acme))
		require.NoError(t, d.ByTenant(ctx, acme))
		denied(t, d.ByTenant(ctx, acme), "acme")
		require.Equal(t, 2, a.calls)
	})
}

func TestLenIsTheCost(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		require.NoError(t, d.Reserve(ctx, &Request{Skus: make([]string, 6)}))
		require.NoError(t, d.Reserve(ctx, &Request{Skus: make([]string, 4)}))
		denied(t, d.Reserve(ctx, &Request{Skus: make([]string, 1)}), "")
		require.ErrorIs(t, d.Reserve(ctx, nil), ratelimit.ErrNilKey, "a field of a nil request")

		require.NoError(t, d.Label(ctx, map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9"}))
		require.NoError(t, d.Label(ctx, map[string]string{"a": "1"}))
		denied(t, d.Label(ctx, map[string]string{"a": "1"}), "")

		require.NoError(t, d.Note(ctx, "0123456789"))
		denied(t, d.Note(ctx, "x"), "")
		require.Equal(t, 5, a.calls)
	})
}

func TestLenThroughGettersAndAsAKey(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		high := &Request{Order: &Order{Priority: 2}, Skus: make([]string, 10)}
		require.NoError(t, d.ReserveByPriority(ctx, high))
		denied(t, d.ReserveByPriority(ctx, &Request{Order: &Order{Priority: 2}, Skus: make([]string, 1)}), "2")
		// A nil request: priority 0, no units.
		require.NoError(t, d.ReserveByPriority(ctx, nil))

		require.NoError(t, d.Book(ctx, [3]string{}))
		denied(t, d.Book(ctx, [3]string{}), "3")
		require.Equal(t, 3, a.calls)
	})
}

func TestFunctionsOfABlankImport(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		ann := tenancy.With(ctx, "ann")
		require.NoError(t, d.ByCaller(ann))
		require.NoError(t, d.ByCaller(ann))
		denied(t, d.ByCaller(ann), "ann")

		bulk := &Request{Order: &Order{Tenant: "bulk"}, Skus: make([]string, 4)}
		require.NoError(t, d.Weighted(ctx, bulk)) // 8 units
		denied(t, d.Weighted(ctx, &Request{Order: &Order{Tenant: "bulk"}, Skus: make([]string, 2)}), "")
		require.NoError(t, d.Weighted(ctx, &Request{Skus: make([]string, 2)})) // 2 units
		require.Equal(t, 4, a.calls)
	})
}

func TestAMethodOfAnotherTypeIsCheckedForNil(t *testing.T) {
	each(t, func(t *testing.T, a *api, d *APIWithRateLimit) {
		require.ErrorIs(t, d.ByPlain(ctx, nil), ratelimit.ErrNilKey)
		require.NoError(t, d.ByPlain(ctx, &Plain{Name: "x"}))
		require.Equal(t, 1, a.calls)
	})
}
