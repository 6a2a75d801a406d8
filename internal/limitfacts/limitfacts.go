// Package limitfacts is the one home of the facts about limits that the
// directive grammar (package parser), the generator (packages check and
// templates) and the runtime (package ratelimit, overrides included) share:
// the algorithms and what each takes, the default algorithm, the bounds,
// when a limit can be decided ([Limit.Check]) and how periods are written
// ([ParseDuration]). Each user words its own messages; the facts live here.
//
// # Adding an algorithm
//
// An algorithm is its row here and one file per layer. The parser, the
// generator (check, templates), the analyzer (through them), redislimit's
// keys, deny cache and carry-back, and httplimit read all they know of it
// from the row ([Algorithm]): its options (Burst, Capacity), whether it
// counts calendar periods (Calendar), whether it paces calls, its largest
// threshold, whether its period is whole milliseconds, the shape of its
// state (State: how long a charge counts) and its Redis key tag. A new
// algorithm touches:
//
//   - internal/limitfacts/limitfacts.go: its name constant and its row in
//     algorithms (the order messages and [Algorithms] list them in, which
//     its ID counts);
//   - internal/limitstate/<algorithm>.go: its Go twin, the in-process
//     decision: its state and its check, charge, refund and chargeOnTop
//     (settle), as slidinglog.go, fixedwindow.go and slidingwindow.go have
//     them (the buckets share bucket.go); of a State not yet listed, its
//     state in limitstate.State and its case in each of the switches on
//     State there (check, charge, refund, chargeOnTop), which keep the
//     decision free of indirect calls;
//   - runtime/limit.go: its exported constant and doc, in the one block of
//     Algorithm constants;
//   - Redis: runtime/redislimit/lua/<algorithm>.lua.tmpl (its blocks:
//     check, commit, rollback, refund, settle, queue) and its row in the
//     Lua registry (luaAlgorithms in luablocks.go: its blocks, LazyClock,
//     MuldivFromMs);
//   - the docs that describe each algorithm: what a settle does
//     (Reservation, in runtime/reserve.go), the algorithms of README.md,
//     and when it takes burst= or capacity=, those options' docs in
//     parser/directive.go and cmd/ratelimitgen/main.go.
//
// The code that depends on the shape of an algorithm's state switches on
// its row's State (and Paces), never on its name: an algorithm of a
// shape already listed touches nothing more. A new State is a new case in
// [State.Span] here and in each switch on State (limitstate's, runtime's
// queuedSpan and validHold, guard's leases and deny cache, redislimit's
// carry-back and validHold).
//
// Tests that loop over [Algorithms] (runtime's and redislimit's
// differential tests among them) then cover it; two pin the list itself
// (TestNames here, TestAlgorithmsAndValid in redislimit).
package limitfacts

import (
	"cmp"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// The algorithm names, as directives and overrides write them.
const (
	SlidingLog    = "sliding_log"
	FixedWindow   = "fixed_window"
	SlidingWindow = "sliding_window"
	TokenBucket   = "token_bucket"
	LeakyBucket   = "leaky_bucket"
	GCRA          = "gcra"
)

// Default is the algorithm of a limit that names none.
const Default = SlidingLog

// MaxValue bounds a limit's threshold, burst and capacity, and its period
// and the time a full bucket takes to drain in microseconds (about 35.7
// years): the Redis script computes in doubles, exact for integers below
// 2^53, and splits its products of two such values in 26-bit halves.
const MaxValue = 1<<50 - 1

// MaxSlidingWindowThreshold is the largest threshold of a sliding_window
// limit: its Redis key holds both windows' counts in one integer that a
// script reads exactly, below 2^53.
const MaxSlidingWindowThreshold = 1<<26 - 1

// MaxLimits is the most limits one call may be decided against, so that a
// reset knows every key a name and key may hold.
const MaxLimits = 16

// MinPeriod is the shortest period: the runtime counts microseconds.
const MinPeriod = time.Microsecond

// Algorithm is what one algorithm takes and needs: its row in the
// registry, from which the parser, the generator, the analyzer and the
// runtime read everything they know of it but its Go twin and its scripts.
type Algorithm struct {
	// ID is its number, 1 up in the order of the rows: the in-process
	// state of a limit (package limitstate) records its algorithm by it,
	// so a limit whose algorithm changes starts afresh, as it does in
	// Redis, where each algorithm has keys of its own (KeyTag).
	ID uint8
	// Name is how directives and overrides write it, such as token_bucket.
	Name string
	// Const is the name of the runtime's constant for it, such as
	// TokenBucket.
	Const string
	// KeyTag is its short name in Redis keys, such as tb. Each algorithm
	// has keys of its own, so a limit whose algorithm changes starts
	// afresh.
	KeyTag string
	// State is the shape of its state, which tells how long a charge
	// counts.
	State State
	// WholeMilliseconds reports that its period must be a whole number of
	// milliseconds: its Redis key expires with the window, and Redis TTLs
	// count milliseconds, so its script reads the time in them.
	WholeMilliseconds bool
	// Calendar reports that it counts calendar periods (day, week, month,
	// year) as well as periods of a fixed length.
	Calendar bool
	// MaxThreshold is its largest threshold.
	MaxThreshold int64
	// Burst reports that it takes a burst (its bucket's size).
	Burst bool
	// Capacity reports that it takes a capacity (its queue's bound).
	Capacity bool
	// Paces reports that it admits a call to wait its turn (the
	// decision's Delay) rather than to run now.
	Paces bool
}

// State is the shape of an algorithm's state, which tells how long a
// charge of units at a time counts.
type State uint8

const (
	// Log is a log of the units admitted: a charge counts for one period
	// after it.
	Log State = iota + 1
	// Window is a count per aligned window: a charge counts until the
	// window it fell in ends, and a denial holds until then whatever the
	// call's cost.
	Window
	// Windows is a count per aligned window and the count of the window
	// before: a charge counts in its window, and weighs in the next.
	Windows
	// Bucket is a theoretical arrival time: a charge counts until it
	// drains, capacity×period/threshold after it.
	Bucket
)

// Span returns how long (µs) a charge counts at most under a limit (not
// a calendar one) of period µs, threshold and capacity whose state has
// the shape s: a period for a Log or a Window, two for Windows (its window
// and the next), and for a Bucket the drain of its capacity,
// ⌈capacity×period/threshold⌉; a period for the zero State.
func (s State) Span(period, threshold, capacity int64) int64 {
	switch s {
	case Windows:
		return 2 * period
	case Bucket:
		return muldiv.Ceil(capacity, period, threshold)
	}
	return period
}

// algorithms lists every algorithm, in the order messages list them.
var algorithms = [...]Algorithm{
	{ID: 1, Name: SlidingLog, Const: "SlidingLog", KeyTag: "log", State: Log, MaxThreshold: MaxValue},
	{ID: 2, Name: FixedWindow, Const: "FixedWindow", KeyTag: "fw", State: Window, MaxThreshold: MaxValue, WholeMilliseconds: true, Calendar: true},
	{ID: 3, Name: SlidingWindow, Const: "SlidingWindow", KeyTag: "sw", State: Windows, MaxThreshold: MaxSlidingWindowThreshold, WholeMilliseconds: true},
	{ID: 4, Name: TokenBucket, Const: "TokenBucket", KeyTag: "tb", State: Bucket, MaxThreshold: MaxValue, Burst: true},
	{ID: 5, Name: LeakyBucket, Const: "LeakyBucket", KeyTag: "lb", State: Bucket, MaxThreshold: MaxValue, Capacity: true, Paces: true},
	{ID: 6, Name: GCRA, Const: "GCRA", KeyTag: "gcra", State: Bucket, MaxThreshold: MaxValue, Burst: true},
}

// Algorithms returns every algorithm, in a fixed order.
func Algorithms() []Algorithm {
	return append([]Algorithm(nil), algorithms[:]...)
}

// Names returns the names of the algorithms for which keep reports true
// (of all of them when keep is nil), in the order of [Algorithms].
func Names(keep func(Algorithm) bool) []string {
	var names []string
	for _, a := range algorithms {
		if keep == nil || keep(a) {
			names = append(names, a.Name)
		}
	}
	return names
}

// Lookup returns the algorithm called name, and whether there is one. The
// empty name is no algorithm's: a limit's empty algorithm means [Default].
func Lookup(name string) (Algorithm, bool) {
	for i := range algorithms { // by index: a row is copied once, when found
		if algorithms[i].Name == name {
			return algorithms[i], true
		}
	}
	return Algorithm{}, false
}

// takesBurst, takesCapacity and countsCalendar select the algorithms that
// take a burst and a capacity, and that count calendar periods.
func takesBurst(a Algorithm) bool     { return a.Burst }
func takesCapacity(a Algorithm) bool  { return a.Capacity }
func countsCalendar(a Algorithm) bool { return a.Calendar }

// Limit is one limit as plain values: at most Threshold units per Period,
// or per Calendar period in the zone TZ (empty means UTC), counted by
// Algorithm (empty means [Default], or [CalendarAlgorithm] for a calendar
// period), with the Burst or Capacity it takes (zero means Threshold).
type Limit struct {
	Period    time.Duration
	Calendar  string
	TZ        string
	Threshold int64
	Algorithm string
	Burst     int64
	Capacity  int64
}

// Error is why a limit cannot be decided.
type Error struct {
	// Field names the value at fault: period, tz, threshold, algorithm,
	// burst or capacity.
	Field string
	// Msg says what is wrong, such as "threshold 0 is not positive".
	Msg string
}

func (e *Error) Error() string { return e.Msg }

func errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// AlgorithmName returns the name of the limit's algorithm, [Default] when
// it names none ([CalendarAlgorithm] for a calendar period).
func (l Limit) AlgorithmName() string {
	if l.Calendar != "" {
		return cmp.Or(l.Algorithm, CalendarAlgorithm)
	}
	return cmp.Or(l.Algorithm, Default)
}

// Facts returns the facts of the limit's algorithm, the one it names or
// its default; the zero Algorithm when it names none known.
func (l Limit) Facts() Algorithm {
	a, _ := Lookup(l.AlgorithmName())
	return a
}

// Bound returns the most units the limit admits at once, and the field
// that sets it: the burst or the capacity when the algorithm takes it and
// it is set, else the threshold.
func (l Limit) Bound() (field string, n int64) {
	a := l.Facts()
	switch {
	case a.Burst && l.Burst > 0:
		return "burst", l.Burst
	case a.Capacity && l.Capacity > 0:
		return "capacity", l.Capacity
	}
	return "threshold", l.Threshold
}

// Check returns nil when the limit can be decided, else an *Error that
// names the first value at fault.
func (l Limit) Check() error {
	name := l.AlgorithmName()
	a, known := Lookup(name)
	maxPeriod := MaxValue * time.Microsecond
	if err := l.checkCalendar(); err != nil || l.Calendar != "" {
		if err == nil {
			// The rest as of the same limit per second: a calendar
			// period's windows are whole seconds, and at most a year.
			err = Limit{Period: time.Second, Threshold: l.Threshold, Algorithm: name, Burst: l.Burst, Capacity: l.Capacity}.Check()
		}
		return err
	}
	switch {
	case l.Period < MinPeriod:
		return errorf("period", "period %s is shorter than %s", l.Period, MinPeriod)
	case l.Period.Microseconds() > MaxValue:
		return errorf("period", "period %s is longer than %s", l.Period, maxPeriod)
	case l.Threshold <= 0:
		return errorf("threshold", "threshold %d is not positive", l.Threshold)
	case l.Threshold > MaxValue:
		return errorf("threshold", "threshold %d is above %d", l.Threshold, int64(MaxValue))
	case !known:
		return errorf("algorithm", "unknown algorithm %q", l.Algorithm)
	case a.WholeMilliseconds && l.Period%time.Millisecond != 0:
		return errorf("period", "period %s of %s is not a whole number of milliseconds", l.Period, name)
	case l.Threshold > a.MaxThreshold:
		return errorf("threshold", "threshold %d of %s is above %d", l.Threshold, name, a.MaxThreshold)
	case l.Burst < 0:
		return errorf("burst", "burst %d is negative", l.Burst)
	case l.Burst > 0 && !a.Burst:
		return errorf("burst", "burst is for %s, not %s", strings.Join(Names(takesBurst), " and "), name)
	case l.Capacity < 0:
		return errorf("capacity", "capacity %d is negative", l.Capacity)
	case l.Capacity > 0 && !a.Capacity:
		return errorf("capacity", "capacity is for %s, not %s", strings.Join(Names(takesCapacity), " and "), name)
	}
	field, n := l.Bound()
	switch {
	case n > MaxValue:
		return errorf(field, "burst or capacity %d is above %d", n, int64(MaxValue))
	case field != "threshold" && !fitsDrain(n, l.Period.Microseconds(), l.Threshold):
		return errorf(field, "%d units at %d per %s take longer than %s to drain", n, l.Threshold, l.Period, maxPeriod)
	}
	return nil
}

// checkCalendar checks the calendar period and the zone: nil for a limit
// with neither.
func (l Limit) checkCalendar() error {
	switch {
	case l.Calendar == "" && l.TZ != "":
		return errorf("tz", "tz is for a calendar period (%s), not a period of %s", strings.Join(calendars[:], ", "), l.Period)
	case l.Calendar == "":
		return nil
	case !IsCalendar(l.Calendar):
		return errorf("period", "unknown calendar period %q (want %s)", l.Calendar, strings.Join(calendars[:], ", "))
	case l.Period != 0:
		return errorf("period", "period %s and calendar period %s: a limit has one period", l.Period, l.Calendar)
	case !l.Facts().Calendar:
		return errorf("algorithm", "calendar period %s is for %s, not %s", l.Calendar, strings.Join(Names(countsCalendar), " and "), l.AlgorithmName())
	}
	if _, err := LoadZone(l.TZ); err != nil {
		return errorf("tz", "%s", err)
	}
	return nil
}

// CalendarOf returns the calendar of a limit whose calendar period and
// zone Check accepted; ok is false for a limit without one.
func (l Limit) CalendarOf() (c Calendar, ok bool) {
	if l.Calendar == "" {
		return Calendar{}, false
	}
	zone, err := LoadZone(l.TZ)
	if err != nil {
		return Calendar{}, false
	}
	return Calendar{Period: l.Calendar, Zone: zone}, true
}

// fitsDrain reports whether units at threshold per period microseconds
// drain within MaxValue microseconds: ⌊units×period/threshold⌋ ≤ MaxValue,
// computed without overflow, for positive arguments.
func fitsDrain(units, period, threshold int64) bool {
	hi, lo := bits.Mul64(uint64(units), uint64(period))
	if hi >= uint64(threshold) {
		return false // the quotient needs more than 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(threshold))
	return q <= MaxValue
}
