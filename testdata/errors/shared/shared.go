// Package shared is a diagnostics test of ratelimitgen: shared lines
// (shared=) that cannot apply are positioned errors.
package shared

import "context"

// A declares two shared lines; the tenant line's key is not a parameter
// of every method.
//
//ratelimit:shared=global period=1 threshold=100
//ratelimit:shared=tenant period=month threshold=1000 key=tenant
type A interface {
	//ratelimit:period=1 threshold=5 key=user
	Get(ctx context.Context, tenant, user string) error
	//ratelimit:period=1 threshold=5 key=user
	NoTenant(ctx context.Context, user string) error
	//ratelimit:period=1 threshold=5 settle=n
	Settled(ctx context.Context, tenant string) (n int, err error)
	//ratelimit:concurrency=3
	Slots(ctx context.Context, tenant string) error
	//ratelimit:period=1 threshold=5 refund=error
	Refunded(ctx context.Context, tenant string) error
}

// B declares global again, and takes lines that do not exist.
//
//ratelimit:shared=global period=1 threshold=100
type B interface {
	//ratelimit:shared=Global
	Typo(ctx context.Context) error
	//ratelimit:shared=nowhere
	Unknown(ctx context.Context) error
	//ratelimit:shared=local period=1 threshold=3
	Declared(ctx context.Context) error
}

// C declares a line that no method takes, and writes shared= alone.
//
//ratelimit:shared=unused period=1 threshold=1
//ratelimit:shared=global
type C interface {
	Plain(ctx context.Context) error
}

// D declares a leased shared line.
//
//ratelimit:shared=leased period=1 threshold=100 prefetch=100ms
type D interface {
	//ratelimit:period=1 threshold=5
	Get(ctx context.Context) error
}
