// Package concurrency is a diagnostics test of ratelimitgen: concurrency
// lines take no rate options, and a method has at most one.
package concurrency

import "context"

// S has concurrency lines that are wrong.
type S interface {
	//ratelimit:concurrency=2
	//ratelimit:concurrency=3
	Twice(ctx context.Context) error
	//ratelimit:concurrency=2 period=1 threshold=5
	Mixed(ctx context.Context) error
	//ratelimit:period=1 threshold=5 lease=10s
	Lease(ctx context.Context) error
	//ratelimit:concurrency=2 lease=1us
	Short(ctx context.Context) error
	//ratelimit:concurrency=2 key=tenant
	NoKey(ctx context.Context) error
	//ratelimit:concurrency=10 key=tenant
	//ratelimit:period=1m threshold=100
	KeyPerLine(ctx context.Context, tenant string) error
	//ratelimit:concurrency=2 cooldown=true
	Cooled(ctx context.Context) error
}
