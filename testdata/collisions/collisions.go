// Package collisions is a golden test of ratelimitgen: every identifier the
// generated code introduces or uses is also used by the package, as a
// parameter, a result, a package-level declaration or an import name.
package collisions

import (
	"context"
	"time"

	ctxpkg "github.com/ratelimitgen/ratelimitgen/testdata/collisions/context"
	errs "github.com/ratelimitgen/ratelimitgen/testdata/collisions/errors"
	rl "github.com/ratelimitgen/ratelimitgen/testdata/collisions/ratelimit"
)

// Package-level names the generator would otherwise pick.
var (
	storeGetRateLimit = "the user's own"
	strconv           = "the user's own"
)

// StoreWithRateLimit is the user's own type with the default name of
// Store's decorator, which is therefore named by its directive.
type StoreWithRateLimit struct{}

// Store's parameters and results are named like what generated code uses.
//
//ratelimit:decorator=LimitedStore
type Store interface {
	// Get names its parameters next, limiter, key, d and w.
	//ratelimit:period=1 threshold=1 key=key
	Get(next context.Context, limiter string, key int, d rl.Limiter, w ctxpkg.Context) (zero rl.Config, err error)
	// Format names its parameters like the imported packages and has no
	// context, so context.Background() must still be reachable.
	//ratelimit:period=1 threshold=1 key=strconv
	Format(ratelimit string, context int, time time.Duration, strconv uint16) (string, error)
	// Code is keyed by a Stringer from a package named errors.
	//ratelimit:period=1 threshold=1 key=code
	Code(ctx ctxpkg.Context, code errs.Code, err error) (errs.Code, error)
	// Unnamed has unnamed and blank parameters.
	//ratelimit:period=1 threshold=1
	Unnamed(context.Context, string, int, ...byte) (int, error)
	//ratelimit:period=1 threshold=1
	Blank(_ context.Context, _ string, p2 int) (_ bool, _ error)
	// Zero returns a result named like the zero value variable.
	//ratelimit:period=1 threshold=1
	Zero(zero, zero1 string) (err1 [2]int, err error)
}

// Generic uses type parameters named like what generated code uses.
type Generic[ratelimit any, key comparable] interface {
	//ratelimit:period=1 threshold=1
	Get(k key) (ratelimit, error)
}

// Chain has methods named like the decorator's fields.
type Chain interface {
	//ratelimit:period=1 threshold=1
	next() error
	limiter() (int, error)
}

// cacheWithRateLimit and newCacheWithRateLimit are the user's own, named
// like the decorator of the unexported cache and its constructor, which
// take the next free names instead: unexported names are no API.
var cacheWithRateLimit, newCacheWithRateLimit = 1, 2

type cache interface {
	//ratelimit:period=1 threshold=1
	Get() error
}
