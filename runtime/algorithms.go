package ratelimit

import (
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// This file routes a limit's state to its algorithm's file, where the
// algorithm decides (check), charges what it admitted (charge), and
// refunds and charges on top of a reservation (refund and chargeOnTop, for
// [MemoryLimiter.Adjust]):
//
//	slidinglog.go     sliding_log
//	fixedwindow.go    fixed_window
//	slidingwindow.go  sliding_window
//	bucket.go         token_bucket, leaky_bucket, gcra
//
// The routing is a switch on the small counter, not an interface or a
// table, so that the decision costs no indirect call. What a new algorithm
// touches is listed in package limitfacts's doc ("Adding an algorithm").

// limitState is the state of one limit of a (name, key) pair, as the
// limit's Redis key holds it: that of its algorithm (counter), one of
//
//	bucketState  token_bucket, leaky_bucket, gcra (bucket.go)
//	windowState  fixed_window (fixedwindow.go), sliding_window (slidingwindow.go)
//	logState     sliding_log (slidinglog.go)
//
// each named as redislimit/lua/<algorithm>.lua.tmpl names it, whose check
// blocks name their twins here. (bucketState comes first, where a pointer
// to it is the state's own: the buckets are the commonest in-process
// limits.)
type limitState struct {
	bucketState
	windowState
	logState
	// counter is the algorithm the state belongs to. A limit whose
	// algorithm changes starts afresh, as in Redis, where each algorithm
	// has its own key (see redislimit's storageKey).
	counter counter
}

// counter is an algorithm as a small number, which the memory limiter
// switches on instead of comparing names; zero is none, the counter of a
// state not yet used.
type counter uint8

const (
	logCounter counter = iota + 1
	fixedCounter
	slidingCounter
	tokenCounter
	leakyCounter
	gcraCounter
)

// counterOf returns the counter of a valid algorithm.
func counterOf(a Algorithm) counter {
	switch a {
	case FixedWindow:
		return fixedCounter
	case SlidingWindow:
		return slidingCounter
	case TokenBucket:
		return tokenCounter
	case LeakyBucket:
		return leakyCounter
	case GCRA:
		return gcraCounter
	}
	return logCounter
}

// plan is a single limit in the units the algorithms compute in: its
// period in µs and its capacity (see [Limit.MaxCost]).
type plan struct {
	Algorithm                   Algorithm
	Period, Threshold, Capacity int64
}

// memoryPlan is a limit as the memory limiter decides it: its plan and,
// for a bucket, the bucket's depth and one unit's emission interval in µs, each a whole part and a fraction in 1/threshold µs. A
// Rule's plans are made once (see memoryRule), a Request's on each call.
type memoryPlan struct {
	plan
	// calendar is the calendar period of a FixedWindow limit that has
	// one, whose windows it takes instead of Period's; else nil.
	calendar         *limitfacts.Calendar
	counter          counter
	depth, depthFrac int64 // capacity × period / threshold
	unit, unitFrac   int64 // period / threshold
	perCall          bool  // the limit counts calls: each takes 1 unit (Limit.PerCall)
	period           muldiv.Divisor
	hold             int64 // SlidingLog: µs a held reservation's units weigh past a period
}

// units returns the units a call of cost takes of the plan's limit.
func (p *memoryPlan) units(cost int64) int64 {
	if p.perCall {
		return 1
	}
	return cost
}

func memoryPlanOf(lim Limit) memoryPlan {
	p := memoryPlan{plan: plan{Algorithm: lim.algorithm(), Period: lim.Period.Microseconds(), Threshold: lim.Threshold, Capacity: lim.MaxCost()}}
	p.counter, p.perCall = counterOf(p.Algorithm), lim.PerCall
	if lim.Calendar != "" {
		p.calendar = calendarOf(lim)
	}
	if p.counter == tokenCounter || p.counter == leakyCounter || p.counter == gcraCounter {
		p.depth, p.depthFrac = muldiv.Rem(p.Capacity, p.Period, p.Threshold)
		p.unit, p.unitFrac = p.Period/p.Threshold, p.Period%p.Threshold
		p.period = muldiv.NewDivisor(p.Period)
	}
	return p
}

// calendarOf returns the calendar of lim, a valid limit with a calendar
// period (nil if it is not valid).
func calendarOf(lim Limit) *limitfacts.Calendar {
	c, ok := lim.facts().CalendarOf()
	if !ok {
		return nil
	}
	return &c
}

// check decides cost units at now for the limit p without charging them,
// describing the decision in d.
func (s *limitState) check(p *memoryPlan, now, cost int64, d *Decision) bool {
	if s.counter != p.counter {
		*s = limitState{counter: p.counter}
	}
	switch p.counter {
	case fixedCounter:
		return s.windowState.fixedCheck(p, now, cost, d)
	case slidingCounter:
		return s.windowState.slidingCheck(p.Period, p.Threshold, now, cost, d)
	case tokenCounter, gcraCounter, leakyCounter:
		return s.bucketState.tatCheck(p, now, cost, d)
	}
	return s.logState.check(p.Period, p.Threshold, now, cost, d)
}

// decide is check, then charge of an admitted call, in one; for an
// admitted call it returns when the limit's state stops mattering (µs).
func (s *limitState) decide(p *memoryPlan, now, cost int64, d *Decision) (bool, int64) {
	if s.counter == p.counter {
		switch p.counter {
		case tokenCounter, gcraCounter, leakyCounter:
			return s.bucketState.tatDecide(p, now, cost, d)
		}
	}
	if !s.check(p, now, cost, d) {
		return false, 0
	}
	return true, s.charge(p, now, cost)
}

// charge charges cost units that check admitted and returns when the
// limit's state stops mattering (µs).
func (s *limitState) charge(p *memoryPlan, now, cost int64) int64 {
	switch p.counter {
	case fixedCounter:
		return s.windowState.fixedCharge(p, now, cost)
	case slidingCounter:
		return s.windowState.slidingCharge(p.Period, now, cost)
	case tokenCounter, gcraCounter, leakyCounter:
		return s.bucketState.tatCharge(p, now, cost)
	}
	if p.hold > 0 {
		return s.logState.chargeHeld(p.Period, now, cost, p.hold)
	}
	return s.logState.charge(p.Period, now, cost)
}

// refund takes back up to n units charged at the time at (see
// [Reservation]). Its twin is the refund block of its redislimit/lua/<algorithm>.lua.tmpl.
func (s *limitState) refund(p *memoryPlan, now, at, n int64) {
	switch p.counter {
	case fixedCounter:
		s.windowState.fixedRefund(p, now, at, n)
	case slidingCounter:
		s.windowState.slidingRefund(p.Period, now, at, n)
	case tokenCounter, gcraCounter, leakyCounter:
		s.bucketState.tatRefund(p, now, n)
	default:
		s.logState.refund(p.Period, now, at, p.hold, n)
	}
}

// chargeOnTop charges n units without deciding, at most what takes the
// state to twice the limit's capacity (a sliding window's count to
// [MaxSlidingWindowThreshold], which its Redis key packs), and returns
// when the state stops mattering (µs), or 0 when it charged nothing. Its
// twin is the settle block of its redislimit/lua/<algorithm>.lua.tmpl.
func (s *limitState) chargeOnTop(p *memoryPlan, now, n int64) int64 {
	switch p.counter {
	case fixedCounter:
		return s.windowState.fixedChargeOnTop(p, now, n)
	case slidingCounter:
		return s.windowState.slidingChargeOnTop(p.Period, p.Capacity, now, n)
	case tokenCounter, gcraCounter, leakyCounter:
		return s.bucketState.tatChargeOnTop(p, now, n)
	}
	return s.logState.chargeOnTop(p.Period, p.Capacity, now, n)
}
