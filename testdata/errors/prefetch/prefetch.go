// Package prefetch is a diagnostics test of ratelimitgen: prefetch= goes
// on one line of a method, with an algorithm a lease can charge.
package prefetch

import "context"

// S has prefetch lines that are wrong, and one that is right.
type S interface {
	//ratelimit:period=1m threshold=10 key=user
	//ratelimit:period=1s threshold=1000 prefetch=100ms
	Second(ctx context.Context, user string) error
	//ratelimit:period=1s threshold=1000 algorithm=leaky_bucket prefetch=100ms
	Leaky(ctx context.Context) error
	//ratelimit:period=1s threshold=1000 prefetch=-1s
	Negative(ctx context.Context) error
	//ratelimit:concurrency=3 prefetch=1s
	Slots(ctx context.Context) error
	//ratelimit:period=1s threshold=1000 prefetch=100ms
	//ratelimit:period=1m threshold=10 key=user prefetch=1s
	Twice(ctx context.Context, user string) error
}
