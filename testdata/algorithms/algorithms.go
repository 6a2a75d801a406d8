// Package algorithms is a golden test of ratelimitgen: one method per
// algorithm, plus the call options that change what a denial does.
package algorithms

import "context"

// API has a method per algorithm and per call option.
type API interface {
	//ratelimit:period=1m threshold=3 algorithm=sliding_log
	Log(ctx context.Context) error
	//ratelimit:period=1m threshold=3 algorithm=fixed_window
	Fixed(ctx context.Context) error
	//ratelimit:period=1m threshold=3 algorithm=sliding_window
	Window(ctx context.Context) error
	//ratelimit:period=1m threshold=60 burst=3 algorithm=token_bucket
	Bucket(ctx context.Context) error
	//ratelimit:period=1m threshold=60 burst=3 algorithm=gcra
	Cell(ctx context.Context) error
	// Paced lets ten calls a second leave, queueing at most two.
	//ratelimit:period=1 threshold=10 capacity=2 algorithm=leaky_bucket
	Paced(ctx context.Context) error
	// Patient waits up to two seconds for its turn.
	//ratelimit:period=200ms threshold=1 wait=2s
	Patient(ctx context.Context) error
	// Rollout only reports what it would deny.
	//ratelimit:period=1m threshold=1 shadow=true
	Rollout(ctx context.Context) error
	// Mixed needs a token bucket and a sliding log to both admit a call.
	//ratelimit:period=1m threshold=60 burst=2 algorithm=token_bucket
	//ratelimit:period=1h threshold=3
	Mixed(ctx context.Context, n int) error
}
