package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Algorithm names the way a [Limit] counts calls.
type Algorithm string

// The algorithms a limit can use. The zero value means [SlidingLog].
const (
	// SlidingLog records every admitted call and admits a call when fewer
	// than Threshold calls were admitted in the last Period. It is exact.
	SlidingLog Algorithm = "sliding_log"
)

// Limit is one rule of the form "at most Threshold calls per Period".
type Limit struct {
	// Period is the length of the window. It must be at least one microsecond.
	Period time.Duration
	// Threshold is how many calls (or units of cost) the window admits.
	Threshold int64
	// Algorithm selects how calls are counted; empty means SlidingLog.
	Algorithm Algorithm
	// Burst is the bucket capacity of TokenBucket and GCRA; zero means
	// Threshold.
	Burst int64
	// Capacity bounds the queue of LeakyBucket; zero means Threshold.
	Capacity int64
}

// String returns the limit in the directive's form, e.g. "2/30s (sliding_log)".
func (l Limit) String() string {
	return fmt.Sprintf("%d/%s (%s)", l.Threshold, l.Period, l.algorithm())
}

func (l Limit) algorithm() Algorithm {
	if l.Algorithm == "" {
		return SlidingLog
	}
	return l.Algorithm
}

// validate reports whether the limit can be decided.
func (l Limit) validate() error {
	switch {
	case l.Period < time.Microsecond:
		return fmt.Errorf("%w: period %s is shorter than 1µs", ErrInvalidLimit, l.Period)
	case l.Threshold <= 0:
		return fmt.Errorf("%w: threshold %d is not positive", ErrInvalidLimit, l.Threshold)
	case l.algorithm() != SlidingLog:
		return fmt.Errorf("%w: unknown algorithm %q", ErrInvalidLimit, l.Algorithm)
	}
	return nil
}

// Request is one call to decide.
type Request struct {
	// Name is the limit identity: every call with the same Name (and Key)
	// shares the same counters. Generated code uses the method's full name,
	// such as "example.com/svc.Store.Get".
	Name string
	// Key optionally splits the limit per value, such as a user id. Any
	// string is safe: it is encoded before it becomes part of a Redis key.
	Key string
	// Cost is how many units the call takes; zero means 1.
	Cost int64
	// Limits must all admit the call. If any denies it, none is charged.
	Limits []Limit
}

func (r *Request) cost() int64 {
	if r.Cost == 0 {
		return 1
	}
	return r.Cost
}

// validate reports a request that no backend could decide.
func (r *Request) validate() error {
	if r.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidLimit)
	}
	if len(r.Limits) == 0 {
		return fmt.Errorf("%w: no limits", ErrInvalidLimit)
	}
	if r.Cost < 0 {
		return fmt.Errorf("%w: negative cost %d", ErrInvalidLimit, r.Cost)
	}
	for _, l := range r.Limits {
		if err := l.validate(); err != nil {
			return err
		}
		if r.cost() > l.Threshold {
			return &CostError{Name: r.Name, Cost: r.cost(), Limit: l}
		}
	}
	return nil
}

// Decision is a limiter's answer for one [Request].
type Decision struct {
	// Allowed reports whether the call was admitted and charged.
	Allowed bool
	// Remaining is how many more units the limit at index Limit admits now.
	Remaining int64
	// RetryAfter is how long until the denied call would be admitted if
	// nobody else called; zero when allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit at index Limit is fully
	// available again.
	ResetAfter time.Duration
	// Delay is how long an admitted call should wait before it proceeds,
	// so that calls leave at a steady rate (LeakyBucket); zero otherwise.
	Delay time.Duration
	// Limit is the index in Request.Limits of the limit the other fields
	// describe: when denied, the limit that denied the call (the one with
	// the longest RetryAfter); when allowed, the one with the fewest
	// remaining units.
	Limit int
}

// Limiter decides calls. Implementations are safe for concurrent use.
type Limiter interface {
	// Allow decides req and, if every limit admits it, charges its cost to
	// each. The error is non-nil only when no decision could be made (a
	// backend failure, wrapping ErrBackend, or an invalid request); a denied
	// call is a Decision with Allowed false and a nil error.
	Allow(ctx context.Context, req Request) (Decision, error)
}
