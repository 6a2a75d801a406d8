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

// SlotPoll is how often a call waiting for one of a concurrency limit's
// slots asks again while fewer calls than slots are ahead of it in its
// queue (ratelimit.SlotPoll).
const SlotPoll = 10 * time.Millisecond

// Lease returns the lease of the slots of a concurrency limit of the
// given period: the period, or DefaultLease when it is 0.
func Lease(period time.Duration) time.Duration {
	if period == 0 {
		return DefaultLease
	}
	return period
}

// Poll returns when a call waiting for one of slots slots behind ahead
// others asks again: in SlotPoll for each slots of them (while slots are
// held, any may free at any time), at the end of its wait if sooner, and
// in a microsecond at least. Its twin is the queue script's (redislimit's
// queue.lua.tmpl).
func Poll(ahead int, slots int64, wait time.Duration) time.Duration {
	return max(min(time.Duration(int64(ahead)/max(slots, 1)+1)*SlotPoll, wait), time.Microsecond)
}

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
