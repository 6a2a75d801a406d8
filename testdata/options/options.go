// Package options is a golden test of ratelimitgen: every directive name
// and how it is written into the rule, and keys and costs of every kind.
package options

import "context"

// Region is a named string type: keys of it are converted with string().
type Region string

// Shard is a named unsigned type.
type Shard uint8

// Jobs uses every per-call and per-limit option.
type Jobs interface {
	// Submit is keyed by a named string and costs as many units as jobs.
	//ratelimit:period=1m threshold=100 key=region cost=jobs
	Submit(ctx context.Context, region Region, jobs int) error
	// Batch has a static cost and an int64 cost-free key.
	//ratelimit:period=1 threshold=10 cost=4 key=id
	Batch(ctx context.Context, id int64) error
	// Route is keyed by a uint64 and costs a uint16.
	//ratelimit:period=90 threshold=50 key=shard cost=n
	Route(shard uint64, n uint16) error
	// Spread is keyed by a named unsigned type.
	//ratelimit:period=1 threshold=5 key=s
	Spread(s Shard) error
	// Smooth uses a token bucket with a burst, waits up to 250ms and fails
	// open when the limiter is down.
	//ratelimit:period=1 threshold=10 algorithm=token_bucket burst=20 wait=250ms onerror=allow
	Smooth(ctx context.Context) error
	// Queue uses a leaky bucket and fails closed.
	//ratelimit:period=1 threshold=10 algorithm=leaky_bucket capacity=50 onerror=deny
	Queue(ctx context.Context) error
	// Observe only records what would be denied; its limits and options are
	// spread over three lines.
	//ratelimit:period=1 threshold=1 shadow=true name=jobs/observe
	//ratelimit:period=1h30m threshold=1000 name=jobs/observe
	//ratelimit:period=1500ms threshold=3 algorithm=gcra burst=5
	Observe(ctx context.Context) error
	// Nanos has odd durations.
	//ratelimit:period=1us threshold=1 wait=1ns
	//ratelimit:period=2h threshold=7200
	Nanos() error
}
