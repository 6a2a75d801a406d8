// Package limitstate is the state of one limit of a (name, key) pair kept
// in process memory, and each algorithm's decision on it: the Go twin of
// the algorithm's Redis script, which the in-process limiter
// (ratelimit.MemoryLimiter) decides calls with. Each algorithm's math is
// in the file named for it, where it decides (check), charges what it
// admitted (charge), and refunds and charges on top of a reservation
// (refund and chargeOnTop, for a settle):
//
//	slidinglog.go     sliding_log
//	fixedwindow.go    fixed_window
//	slidingwindow.go  sliding_window
//	bucket.go         token_bucket, leaky_bucket, gcra
//
// All it knows of an algorithm is its row in package limitfacts: the
// shape of its state (limitfacts.State) routes a limit to its file, and
// its ID tells its state from another algorithm's. The routing is a switch
// on the shape, not an interface or a table, so that the decision costs no
// indirect call.
package limitstate

import (
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// State is the state of one limit of a (name, key) pair, as the limit's
// Redis key holds it: that of its algorithm (id), one of
//
//	bucketState  token_bucket, leaky_bucket, gcra (bucket.go)
//	windowState  fixed_window (fixedwindow.go), sliding_window (slidingwindow.go)
//	logState     sliding_log (slidinglog.go)
//
// each named as redislimit/lua/<algorithm>.lua.tmpl names it, whose check
// blocks name their twins here. (bucketState comes first, where a pointer
// to it is the state's own: the buckets are the commonest in-process
// limits.) The zero State is a limit's before any call.
type State struct {
	bucketState
	windowState
	logState
	// id is the ID of the algorithm the state belongs to (0: none yet). A
	// limit whose algorithm changes starts afresh, as in Redis, where each
	// algorithm has its own key (see redislimit's storageKey).
	id uint8
}

// Decision is what one limit's state tells of a call: the fields of
// ratelimit.Decision that a limit sets, in the same units.
type Decision struct {
	Remaining                     int64
	RetryAfter, ResetAfter, Delay time.Duration
}

// Plan is a limit as its state is decided against: its period in µs, its
// threshold and its capacity (the most units it admits at once), and, for
// a bucket, the bucket's depth and one unit's emission interval in µs,
// each a whole part and a fraction in 1/threshold µs. The in-process
// limiter makes a rule's plans once, a request's on each call.
type Plan struct {
	Period, Threshold, Capacity int64
	// calendar is the calendar period of a FixedWindow limit that has
	// one, whose windows it takes instead of Period's; else nil.
	calendar         *limitfacts.Calendar
	id               uint8            // the algorithm's ID
	shape            limitfacts.State // the shape of its state
	paces            bool             // it paces calls (a leaky bucket's Delay)
	depth, depthFrac int64            // capacity × period / threshold
	unit, unitFrac   int64            // period / threshold
	perCall          bool             // the limit counts calls: each takes 1 unit
	period           muldiv.Divisor
	hold             int64 // SlidingLog: µs a held reservation's units weigh past a period
}

// NewPlan returns the plan of lim, a valid limit that counts calls when
// perCall is set (each takes 1 unit, whatever it costs), whose units, if
// it keeps them in a log, weigh hold µs past a period (a held
// reservation's; 0 for none). A limit of no known algorithm is planned as
// one of the default algorithm.
func NewPlan(lim limitfacts.Limit, perCall bool, hold int64) Plan {
	a, ok := limitfacts.Lookup(lim.AlgorithmName())
	if !ok {
		a, _ = limitfacts.Lookup(limitfacts.Default)
	}
	_, capacity := lim.Bound()
	p := Plan{Period: lim.Period.Microseconds(), Threshold: lim.Threshold, Capacity: capacity}
	p.id, p.shape, p.paces, p.perCall = a.ID, a.State, a.Paces, perCall
	if lim.Calendar != "" {
		if c, ok := lim.CalendarOf(); ok {
			p.calendar = &c
		}
	}
	switch p.shape {
	case limitfacts.Bucket:
		p.depth, p.depthFrac = muldiv.Rem(p.Capacity, p.Period, p.Threshold)
		p.unit, p.unitFrac = p.Period/p.Threshold, p.Period%p.Threshold
		p.period = muldiv.NewDivisor(p.Period)
	case limitfacts.Log:
		p.hold = hold
	}
	return p
}

// Units returns the units a call of cost takes of the plan's limit.
func (p *Plan) Units(cost int64) int64 {
	if p.perCall {
		return 1
	}
	return cost
}

// Check decides cost units at now for the limit p without charging them,
// describing the decision in d.
func (s *State) Check(p *Plan, now, cost int64, d *Decision) bool {
	if s.id != p.id {
		*s = State{id: p.id}
	}
	switch p.shape {
	case limitfacts.Window:
		return s.windowState.fixedCheck(p, now, cost, d)
	case limitfacts.Windows:
		return s.windowState.slidingCheck(p.Period, p.Threshold, now, cost, d)
	case limitfacts.Bucket:
		return s.bucketState.tatCheck(p, now, cost, d)
	}
	return s.logState.check(p.Period, p.Threshold, now, cost, d)
}

// Decide is Check, then Charge of an admitted call, in one; for an
// admitted call it returns when the limit's state stops mattering (µs).
func (s *State) Decide(p *Plan, now, cost int64, d *Decision) (bool, int64) {
	if s.id == p.id && p.shape == limitfacts.Bucket {
		return s.bucketState.tatDecide(p, now, cost, d)
	}
	if !s.Check(p, now, cost, d) {
		return false, 0
	}
	return true, s.Charge(p, now, cost)
}

// Charge charges cost units that Check admitted and returns when the
// limit's state stops mattering (µs).
func (s *State) Charge(p *Plan, now, cost int64) int64 {
	switch p.shape {
	case limitfacts.Window:
		return s.windowState.fixedCharge(p, now, cost)
	case limitfacts.Windows:
		return s.windowState.slidingCharge(p.Period, now, cost)
	case limitfacts.Bucket:
		return s.bucketState.tatCharge(p, now, cost)
	}
	if p.hold > 0 {
		return s.logState.chargeHeld(p.Period, now, cost, p.hold)
	}
	return s.logState.charge(p.Period, now, cost)
}

// Adjust changes by delta units, without deciding, the charge of a
// reservation that the limit p admitted at the time at: it refunds
// -delta units when delta is negative, and charges delta more when it is
// positive (see ratelimit.Reservation). It returns when the state stops
// mattering (µs) after a charge, else 0. A state of another algorithm's
// (an override changed the limit's) is the reservation's no more: it
// changes nothing.
func (s *State) Adjust(p *Plan, now, at, delta int64) int64 {
	if s.id != p.id {
		if delta < 0 || s.id != 0 {
			return 0
		}
		*s = State{id: p.id}
	}
	if delta < 0 {
		s.refund(p, now, at, -delta)
		return 0
	}
	return s.chargeOnTop(p, now, delta)
}

// refund takes back up to n units charged at the time at. Its twin is
// the refund block of its redislimit/lua/<algorithm>.lua.tmpl.
func (s *State) refund(p *Plan, now, at, n int64) {
	switch p.shape {
	case limitfacts.Window:
		s.windowState.fixedRefund(p, now, at, n)
	case limitfacts.Windows:
		s.windowState.slidingRefund(p.Period, now, at, n)
	case limitfacts.Bucket:
		s.bucketState.tatRefund(p, now, n)
	default:
		s.logState.refund(p.Period, now, at, p.hold, n)
	}
}

// chargeOnTop charges n units without deciding, at most what takes the
// state to twice the limit's capacity (a sliding window's count to
// limitfacts.MaxSlidingWindowThreshold, which its Redis key packs), and
// returns when the state stops mattering (µs), or 0 when it charged
// nothing. Its twin is the settle block of its
// redislimit/lua/<algorithm>.lua.tmpl.
func (s *State) chargeOnTop(p *Plan, now, n int64) int64 {
	switch p.shape {
	case limitfacts.Window:
		return s.windowState.fixedChargeOnTop(p, now, n)
	case limitfacts.Windows:
		return s.windowState.slidingChargeOnTop(p.Period, p.Capacity, now, n)
	case limitfacts.Bucket:
		return s.bucketState.tatChargeOnTop(p, now, n)
	}
	return s.logState.chargeOnTop(p.Period, p.Capacity, now, n)
}

// Window returns the state of a window limit (zero for the others), named
// as the script names it: stateEnd, in ms since the Unix epoch, a second
// before its Redis key's expiry; count, the count of the window a call
// counts in; prev, the count of the window before (sliding_window).
func (s *State) Window() (stateEnd, count, prev int64) {
	return s.windowState.stateEnd, s.windowState.count, s.windowState.prev
}
