// Package names is a diagnostics test of ratelimitgen: a generated exported
// name that the package declares already is an error at that declaration,
// never a silently numbered name, and decorator= is checked.
package names

// StoreWithRateLimit takes the default name of Store's decorator.
type StoreWithRateLimit struct{}

// Store is decorated.
type Store interface {
	//ratelimit:period=1 threshold=1
	Get() error
}

// NewCacheWithRateLimit takes the default name of Cache's constructor.
func NewCacheWithRateLimit() {}

// Cache is decorated.
type Cache interface {
	//ratelimit:period=1 threshold=1
	Get() error
}

// Taken is declared, and chosen by decorator=.
var Taken = 1

// Chosen names its decorator with a declared name.
//
//ratelimit:decorator=Taken
type Chosen interface {
	//ratelimit:period=1 threshold=1
	Get() error
}

// First and Second choose the same name.
//
//ratelimit:decorator=Same
type First interface {
	//ratelimit:period=1 threshold=1
	Get() error
}

// Second is the other.
//
//ratelimit:decorator=Same
type Second interface {
	//ratelimit:period=1 threshold=1
	Get() error
}

// Twice names its decorator twice.
//
//ratelimit:decorator=One
//ratelimit:decorator=Two
type Twice interface {
	//ratelimit:period=1 threshold=1
	Get() error
}

// Unlimited names a decorator but declares no limit.
//
//ratelimit:decorator=LimitedUnlimited
type Unlimited interface {
	Get() error
}

// OnMethod has decorator= on a method.
type OnMethod interface {
	//ratelimit:decorator=Nope
	//ratelimit:period=1 threshold=1
	Get() error
}

// RateLimitRules is declared, and is the name of the function the
// generated file declares to return the package's rules.
func RateLimitRules() []string { return nil }

// Reserved chooses the name of that function for its decorator.
//
//ratelimit:decorator=RateLimitRules
type Reserved interface {
	//ratelimit:period=1 threshold=1
	Get() error
}
