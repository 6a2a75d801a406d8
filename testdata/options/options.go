// Package options is a golden test of ratelimitgen: every directive name
// and how it is written into the rule, and keys and costs of every kind.
package options

import "context"

// Region is a named string type: keys of it are converted with string().
type Region string

// Shard is a named unsigned type.
type Shard uint8

// Account reaches its owner through a method, which the generated code
// calls once and checks for nil.
type Account struct{ owner *Owner }

// Owner returns the account's owner, nil when it has none.
func (a *Account) Owner() *Owner { return a.owner }

// Owner is keyed by its ID.
type Owner struct{ ID int32 }

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
	// Smooth names its algorithm, waits up to 250ms and fails open when the
	// limiter is down.
	//ratelimit:period=1 threshold=10 algorithm=sliding_log wait=250ms onerror=allow
	Smooth(ctx context.Context) error
	// Queue fails closed.
	//ratelimit:period=1 threshold=10 onerror=deny
	Queue(ctx context.Context) error
	// Steady is decided in process, against the same limit, while the
	// limiter cannot decide.
	//ratelimit:period=1h threshold=3 key=user onerror=local
	Steady(ctx context.Context, user string) error
	// Observe only records what would be denied; its limits and options are
	// spread over three lines.
	//ratelimit:period=1 threshold=1 shadow=true name=jobs/observe
	//ratelimit:period=1h30m threshold=1000 name=jobs/observe
	//ratelimit:period=1500ms threshold=3 algorithm=sliding_log
	Observe(ctx context.Context) error
	// Charge is keyed through a method and returns an unnamed struct.
	//ratelimit:period=1 threshold=1 key=acct.Owner.ID
	Charge(ctx context.Context, acct *Account) (struct{ Cents int64 }, error)
	// Nanos has odd durations.
	//ratelimit:period=1us threshold=1 wait=1ns
	//ratelimit:period=2h threshold=7200
	Nanos() error
	// Hot admits its every-call line from leases (prefetch=), beside an
	// exact line per user.
	//ratelimit:period=1s threshold=1000 algorithm=fixed_window prefetch=100ms
	//ratelimit:period=1m threshold=10 key=user
	Hot(ctx context.Context, user string) error
	// HotSecond leases its every-call line, second after an exact line per
	// user: a lease charges its line alone, under its own key.
	//ratelimit:period=1m threshold=10 key=user
	//ratelimit:period=1s threshold=1000 algorithm=fixed_window prefetch=100ms
	HotSecond(ctx context.Context, user string) error
}
