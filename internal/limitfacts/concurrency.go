package limitfacts

import (
	"fmt"
	"time"
)

// Concurrency is the algorithm name of a concurrency limit: at most
// Threshold calls in flight at once, each holding a slot under a lease of
// Period (default [DefaultLease]) that a running call renews. It is not
// one of the rate algorithms (see Names): calls hold its slots, and give
// them back, rather than spend units.
const Concurrency = "concurrency"

// DefaultLease is the lease of a concurrency slot whose limit names none:
// how long the slot of a process that died stays taken.
const DefaultLease = 30 * time.Second

// MinLease is the shortest lease: Redis expires slots in milliseconds.
const MinLease = time.Millisecond

// CheckConcurrency reports why a concurrency limit of slots slots and the
// given lease (0: DefaultLease) cannot be held, or nil.
func CheckConcurrency(slots int64, lease time.Duration) error {
	switch {
	case slots <= 0:
		return fmt.Errorf("concurrency %d: want a positive number of calls in flight", slots)
	case slots > MaxValue:
		return fmt.Errorf("concurrency %d: at most %d", slots, MaxValue)
	case lease != 0 && lease < MinLease:
		return fmt.Errorf("lease %s: at least %s", lease, MinLease)
	case lease > time.Duration(MaxValue)*time.Microsecond:
		return fmt.Errorf("lease %s: too long", lease)
	}
	return nil
}
