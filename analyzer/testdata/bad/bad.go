// Package bad has directive errors, each reported where it is.
package bad

import "context"

// StoreWithRateLimit takes the name of Store's decorator.
type StoreWithRateLimit struct{} // want `StoreWithRateLimit is declared here and is the name of the decorator of Store`

// Store is decorated.
type Store interface {
	// want +1 `unknown name "threshhold"; did you mean threshold\?`
	//ratelimit:period=1 threshhold=1
	Get(ctx context.Context) error
	// want +1 `key=id: Store.Put has no parameter id \(its parameters are ctx, key\)`
	//ratelimit:period=1 threshold=1 key=id
	Put(ctx context.Context, key string) error
	// want +1 `key=principal\(ctx\): package bad declares no function principal`
	//ratelimit:period=1 threshold=1 key=principal(ctx)
	Del(ctx context.Context) error
	// Each line has its own key: the second line's mistake is on it.
	// want +2 `key=tenant: Store.Add has no parameter tenant \(its parameters are ctx, user\)`
	//ratelimit:period=1 threshold=1 key=user
	//ratelimit:period=1h threshold=100 key=tenant
	Add(ctx context.Context, user string) error
	// want +2 `keyhash=false here but keyhash=true on another line keyed by user: it applies to the key, so write keyhash=true on every line keyed by user`
	//ratelimit:period=1 threshold=1 key=user keyhash=true
	//ratelimit:period=1h threshold=100 key=user
	Set(ctx context.Context, user string) error
	// want +1 `"//ratelimt:" is not a directive: did you mean //ratelimit:\?`
	//ratelimt:period=1 threshold=1
	Typo(ctx context.Context) error
	// want +1 `"//rate-limit:" is not a directive: did you mean //ratelimit:\?`
	//rate-limit:period=1 threshold=1
	Dash(ctx context.Context) error
	// want +1 `settle=count: Store.Len has no result count \(its results are n, err\)`
	//ratelimit:period=1 threshold=10 settle=count
	Len(ctx context.Context) (n int, err error)
}

// want +2 `misplaced directive: on func F, which is not a method`
//
//ratelimit:period=1 threshold=1
func F() error { return nil }
