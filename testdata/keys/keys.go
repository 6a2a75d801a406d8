// Package keys is a golden test of ratelimitgen: keys and costs computed
// by functions, pointer keys, type parameter keys, emptykey=deny and
// keyhash=true.
package keys

import (
	"context"
	"errors"

	"github.com/ratelimitgen/ratelimitgen/testdata/keys/auth"
)

// Req is a request.
type Req struct {
	Org  *Org
	Size int32
}

// Org is an organisation.
type Org struct{ ID string }

// Tenant is a fmt.Stringer.
type Tenant struct{ Org, User string }

func (t Tenant) String() string { return t.Org + "/" + t.User }

// principal returns the caller's principal, or "".
func principal(ctx context.Context) string {
	p, _ := auth.Principal(ctx)
	return p
}

// tenant combines the caller and the organisation.
func tenant(ctx context.Context, org *Org) Tenant {
	return Tenant{Org: org.ID, User: principal(ctx)}
}

// errTooLarge is returned by weight for requests it cannot weigh.
var errTooLarge = errors.New("too large")

// weight returns what a request costs.
func weight(req *Req) (int, error) {
	if req.Size > 100 {
		return 0, errTooLarge
	}
	return int(req.Size), nil
}

// API is limited by who calls it.
type API interface {
	// ByPrincipal is keyed by a function of this package.
	//ratelimit:period=1m threshold=2 key=principal(ctx)
	ByPrincipal(ctx context.Context) error
	// ByAuth is keyed by a function of an imported package that can fail;
	// its error fails the call, even under onerror=allow.
	//ratelimit:period=1m threshold=2 key=auth.Principal(ctx) onerror=allow
	ByAuth(ctx context.Context) (string, error)
	// ByTenant is keyed by a Stringer from a function of two arguments.
	//ratelimit:period=1m threshold=1 key="tenant(ctx, req.Org)"
	ByTenant(ctx context.Context, req *Req) error
	// Pointers are keys; nil gives ratelimit.ErrNilKey.
	//ratelimit:period=1m threshold=1 key=id
	ByID(ctx context.Context, id *string) error
	//ratelimit:period=1m threshold=1 key=n
	ByNumber(ctx context.Context, n *int64) error
	// An empty principal is denied.
	//ratelimit:period=1m threshold=1 key=principal(ctx) emptykey=deny
	Strict(ctx context.Context) error
	// Costs from a path and from a function that can fail.
	//ratelimit:period=1m threshold=10 cost=req.Size
	Upload(ctx context.Context, req *Req) error
	//ratelimit:period=1m threshold=10 cost=weight(req)
	Weigh(ctx context.Context, req *Req) error
	// A secret key is limited under its digest, after the check for "".
	//ratelimit:period=1m threshold=1 key=apiKey emptykey=deny keyhash=true
	BySecret(ctx context.Context, apiKey string) error
}

// Str is any string type.
type Str interface{ ~string }

// Num is any signed integer type.
type Num interface{ ~int64 | ~int32 }

// Generic is keyed by type parameters.
type Generic[S Str, N Num] interface {
	//ratelimit:period=1m threshold=1 key=s
	ByString(s S) error
	//ratelimit:period=1m threshold=1 key=n
	ByNumber(n N) error
}
