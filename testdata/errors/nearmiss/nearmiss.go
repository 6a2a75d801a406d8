// Package nearmiss is a diagnostics test of ratelimitgen: comments that
// almost start a directive are errors, even in a package with no
// directive, so that go generate fails rather than leave the methods
// unlimited.
package nearmiss

// S has near misses of directives, and prose about rate limits.
type S interface {
	//ratelimt:period=30 threshold=2
	A() error
	//ratelimits:period=30 threshold=2
	B() error
	//ratelimit=period=30 threshold=2
	C() error
	//rate-limit:period=30 threshold=2
	D() error
	// RateLimiter: the calls of E are rate limited, see the docs.
	// rate limits: 30 calls, as in n=30.
	E() error
}
