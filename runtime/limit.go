package ratelimit

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// Algorithm names the way a [Limit] counts calls.
type Algorithm string

// The algorithms a limit can use. The zero value means [SlidingLog]. Every
// algorithm is decided the same way by [MemoryLimiter] and redislimit.Limiter.
// (A limit whose Algorithm is "concurrency" limits the calls in flight
// instead: see [Reservation].)
const (
	// SlidingLog records every admitted call and admits a call when fewer
	// than Threshold calls were admitted in the last Period. It is exact.
	// Memory grows with the calls admitted in the window, not with their
	// cost: in Redis about 10 bytes a call of cost 1, and about 23 one of
	// a larger cost, which costs the same server work.
	SlidingLog Algorithm = limitfacts.SlidingLog

	// FixedWindow counts calls in windows of one Period aligned to
	// multiples of the Period since the Unix epoch (or in the windows of
	// a Calendar period), and admits up to Threshold per window. In Redis it is one INCRBY on a counter that
	// expires with its window, so its Period must be a whole number of
	// milliseconds, as TTLs are. A window resets all at once, so up to
	// 2×Threshold calls can pass in one Period that straddles a window
	// edge (Threshold at the end of one window, Threshold at the start of
	// the next).
	FixedWindow Algorithm = limitfacts.FixedWindow

	// SlidingWindow approximates a sliding log with two fixed-window
	// counters: a call is admitted when
	//
	//	previous×(Period−elapsed)/Period + current + cost ≤ Threshold
	//
	// where current counts the aligned window now running, previous the
	// one before it, and elapsed is the time since the current window
	// began; the weighted term is rounded up to whole units, computed
	// exactly, with elapsed in whole milliseconds (rounded down). Its
	// Period must be a whole number of milliseconds and its Threshold at
	// most [MaxSlidingWindowThreshold]: in Redis both counts are one
	// integer, incremented by one INCRBY, whose TTL tells elapsed (see
	// FixedWindow). Memory is constant per key. It admits at most Threshold
	// per aligned window, and assumes the previous window's calls were
	// spread evenly: when they bunched at its end, up to 2×Threshold−1
	// calls can pass in one Period (never more). On bursty traffic it
	// went up to 84% over in one Period (docs/algorithms.md has the
	// measurements).
	SlidingWindow Algorithm = limitfacts.SlidingWindow

	// TokenBucket is a bucket of Burst tokens (default Threshold) that
	// refills at Threshold tokens per Period, continuously to the
	// microsecond; a call takes cost tokens or is denied. Over any span
	// t it admits at most Burst + Threshold×t/Period units. It stores
	// only the time at which the bucket will be full again, so it makes
	// exactly the decisions of GCRA with the same Burst.
	TokenBucket Algorithm = limitfacts.TokenBucket

	// LeakyBucket is a pacing queue (a leaky bucket used as a meter):
	// admitted calls leave at a steady Threshold per Period, each told in
	// [Decision.Delay] how long to wait for its turn (rounded up to the
	// microsecond, so never early). Capacity (default Threshold) bounds
	// the units queued, counting the call admitted now; a call that would
	// overflow the queue is denied, with RetryAfter the time a place for
	// it frees.
	LeakyBucket Algorithm = limitfacts.LeakyBucket

	// GCRA is the generic cell rate algorithm, as in
	// github.com/go-redis/redis_rate: one value per key, the theoretical
	// arrival time. It admits bursts of up to Burst units (default
	// Threshold) and Threshold per Period on average; Remaining is how
	// many more unit calls it would admit now.
	GCRA Algorithm = limitfacts.GCRA

	// Unlimited and Block count nothing: they are the one limit of an
	// override (see [ParseOverrides]) that exempts the calls it applies to
	// from every limit of their rule, or denies them all. A rule's own
	// limits cannot use them.
	Unlimited Algorithm = "unlimited"
	Block     Algorithm = "block"
)

// Algorithms returns every supported algorithm, in a fixed order.
func Algorithms() []Algorithm {
	names := limitfacts.Names(nil)
	algs := make([]Algorithm, len(names))
	for i, name := range names {
		algs[i] = Algorithm(name)
	}
	return algs
}

// Valid reports whether a names a supported algorithm. The empty
// Algorithm, which means SlidingLog, is valid.
func (a Algorithm) Valid() bool {
	_, ok := limitfacts.Lookup(cmp.Or(string(a), limitfacts.Default))
	return ok
}

// maxLimitValue bounds a limit's threshold, burst and capacity, and its
// period and Burst×Period/Threshold in microseconds (see limitfacts.MaxValue).
const maxLimitValue = limitfacts.MaxValue

// Bounds of requests, of the memory limiter, of what a call gives back,
// of a cooldown and of a waiting call's place.
const (
	// MaxLimits is the most limits one [Request] may have, so that Reset
	// knows every key a name and key may hold (see redislimit.Limiter.Reset).
	MaxLimits = limitfacts.MaxLimits
	// MaxSlidingWindowThreshold is the largest Threshold of a SlidingWindow
	// limit: its Redis key holds both windows' counts in one integer that a
	// script reads exactly, below 2^53.
	MaxSlidingWindowThreshold = limitfacts.MaxSlidingWindowThreshold
	// DefaultMaxKeys is how many (name, key) pairs a memory limiter keeps
	// unless [WithMaxKeys] says otherwise.
	DefaultMaxKeys = 1 << 20
	// GiveBackTimeout bounds what [Reservation.Settle] and
	// [Reservation.Release] ask of the backend: they run on a context
	// detached from the caller's cancellation, so that what a call gives back
	// is given back even when its caller has gone, within this time.
	GiveBackTimeout = 5 * time.Second
	// MaxCooldown bounds a cooldown: [Rule.CooldownOn] caps the retry time it
	// reads from an error at MaxCooldown, so that no upstream's answer (a
	// hostile or broken Retry-After, a RetryInfo of years) blocks a key for
	// longer. An upstream that wants a longer pause refuses the next call
	// after the hour too, which cools the line again.
	MaxCooldown = time.Hour
	// QueueGrace is how long after the retry it was told a waiting call
	// keeps its place in its queue (see [OpTurn]): a call that comes back
	// later (its process stalled or died) loses it, so the calls behind it
	// wait at most that much longer for a place nobody will take.
	QueueGrace = 5 * time.Second
	// MaxQueue is the most calls that wait in one queue (see [OpTurn]): a
	// call denied while as many wait is refused its place, and returns its
	// denial.
	MaxQueue = 4096
	// SlotPoll is how often a call waiting for one of a concurrency
	// limit's slots asks again while fewer calls than slots are ahead of
	// it in its queue (a slot frees when a call gives it back, which
	// nothing foretells), and k+1 times that while k times the slots are
	// (see [OpTurn]).
	SlotPoll = limitfacts.SlotPoll
	// BusyRetry is the RetryAfter of a call shed because the limiter's
	// client was saturated ([ErrBusy]).
	BusyRetry = 100 * time.Millisecond
)

// Limit is one rule of the form "at most Threshold calls per Period" (or
// per Calendar period).
type Limit struct {
	// Period is the length of the window. It must be at least one
	// microsecond, or zero with a Calendar period.
	Period time.Duration
	// Calendar, when set, is the period instead: "day", "week" (an ISO
	// week, from Monday), "month" or "year", whose windows start at local
	// midnight in TZ, so a day lasts 23 or 25 hours where TZ changes its
	// offset. Only FixedWindow counts calendar periods, and it is their
	// default Algorithm; ResetAfter and RetryAfter point at the next
	// window's start.
	Calendar string
	// TZ is the IANA time zone of a Calendar period, such as
	// "Europe/Paris"; empty means UTC. The zone is loaded from the
	// system's tz database, or the one embedded by importing time/tzdata
	// (generated code that names a zone imports it).
	TZ string
	// Threshold is how many calls (or units of cost) the window admits.
	Threshold int64
	// Algorithm selects how calls are counted; empty means SlidingLog
	// (FixedWindow for a Calendar period).
	Algorithm Algorithm
	// Burst is the bucket capacity of TokenBucket and GCRA: the most units
	// admitted at once; zero means Threshold. Other algorithms reject it.
	Burst int64
	// Capacity bounds the queue of LeakyBucket, in units; zero means
	// Threshold. Other algorithms reject it.
	Capacity int64
	// Prefetch, when positive, lets a process admit the limit's calls from
	// leases (see guard.Leases): units of the limit charged ahead in one
	// round trip, used in process for at most Prefetch, and given back
	// unused when the lease ends, never admitting a call the limit would
	// deny. A limiter without the lease guard decides such a limit exactly,
	// as it decides one without Prefetch. Every algorithm but LeakyBucket
	// and concurrency takes it; zero means no leases.
	Prefetch time.Duration
	// PerCall makes the limit count calls: each call takes 1 unit of it,
	// whatever the request's Cost, and a settle leaves it as it is. A
	// request's other limits take its Cost, so "60 calls and 100,000
	// tokens per minute" is one request of the tokens' cost, decided and
	// charged all or nothing.
	PerCall bool
	// Cooldown marks the limit's line as one an upstream can cool (the
	// directive's cooldown=true): [Rule.Cooldown] records that the line's
	// key is denied until an upstream's retry time, and every process
	// sharing the limiter's state enforces it (see [OpCool]). A
	// concurrency limit takes no cooldown.
	Cooldown bool
}

// Units returns the units a call of cost units (zero means 1) takes of
// the limit: 1 when it counts calls (PerCall), else cost.
func (l Limit) Units(cost int64) int64 {
	if l.PerCall || cost == 0 {
		return 1
	}
	return cost
}

// String returns the limit in the directive's form, e.g. "2/30s
// (sliding_log)", "10000/month Europe/Paris (fixed_window)" or "1000/1s
// (fixed_window, prefetch 100ms)", or
// "unlimited" or "block", or for a concurrency limit "10 in flight
// (concurrency, lease 30s)".
func (l Limit) String() string {
	if l.Algorithm == Unlimited || l.Algorithm == Block {
		return string(l.Algorithm)
	}
	if isConcurrency(l) {
		return fmt.Sprintf("%d in flight (concurrency, lease %s)", l.Threshold, l.lease())
	}
	if l.Prefetch > 0 {
		return fmt.Sprintf("%d/%s (%s, prefetch %s)", l.Threshold, l.per(), l.algorithm(), l.Prefetch)
	}
	return fmt.Sprintf("%d/%s (%s)", l.Threshold, l.per(), l.algorithm())
}

// per returns the limit's period as its String writes it: the duration,
// or the calendar period and its zone unless that is UTC.
func (l Limit) per() string {
	switch {
	case l.Calendar == "":
		return l.Period.String()
	case l.TZ == "":
		return l.Calendar
	}
	return l.Calendar + " " + l.TZ
}

func (l Limit) algorithm() Algorithm {
	return Algorithm(l.facts().AlgorithmName())
}

// AlgorithmOrDefault returns the algorithm that counts l's calls: its
// Algorithm, or the default when it names none (FixedWindow for a
// Calendar period, else SlidingLog).
func (l Limit) AlgorithmOrDefault() Algorithm { return l.algorithm() }

// facts returns the limit as package limitfacts takes it.
func (l Limit) facts() limitfacts.Limit {
	return limitfacts.Limit{
		Period: l.Period, Calendar: l.Calendar, TZ: l.TZ, Threshold: l.Threshold,
		Algorithm: string(l.Algorithm), Burst: l.Burst, Capacity: l.Capacity,
	}
}

// blockSpan is how long a call that an override blocks is told to wait,
// when l is its rule's first limit: l's Period, or the rest of its
// calendar window on limiter's clock.
func (l Limit) blockSpan(limiter Limiter) time.Duration {
	cal, ok := l.facts().CalendarOf()
	if !ok {
		return l.Period
	}
	now := time.Now()
	if c := configOf(limiter); c != nil && c.Clock != nil {
		now = c.Clock.Now()
	}
	_, end := cal.Window(now)
	return end.Sub(now)
}

// MaxCost returns the most units the limit can ever admit at once: the
// Burst of TokenBucket and GCRA, the Capacity of LeakyBucket, else (or when
// those are zero) the Threshold.
func (l Limit) MaxCost() int64 {
	_, n := l.facts().Bound()
	return n
}

// validate reports whether the limit can be decided: nil, or why not in an
// error wrapping ErrInvalidLimit.
func (l Limit) validate() error {
	if err := l.facts().Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	return l.validatePrefetch()
}

// validatePrefetch reports a Prefetch that no lease can honour: a
// negative one, or one of an algorithm that paces (LeakyBucket, whose
// calls are each told their own delay) or a concurrency limit (whose
// slots are held, not charged).
func (l Limit) validatePrefetch() error {
	switch {
	case l.Prefetch == 0:
		return nil
	case l.Prefetch < 0:
		return fmt.Errorf("%w: negative prefetch %s", ErrInvalidLimit, l.Prefetch)
	case l.facts().Facts().Paces || isConcurrency(l):
		return fmt.Errorf("%w: prefetch of a %s limit: its calls cannot be admitted from a lease", ErrInvalidLimit, l.algorithm())
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
	// string is safe: it is encoded before it becomes part of a Redis key,
	// and one longer than 64 encoded bytes is replaced by a stand-in
	// holding its SHA-256 (see [LimitError]), so keys stay small.
	Key string
	// Keys, when not nil, gives each limit its own key in place of Key:
	// Keys[i] keys Limits[i] (such as a user id for one limit and "" for
	// one that counts every call as one), so len(Keys) must be
	// len(Limits). Limit i's state belongs to (Name, Keys[i], i): limits
	// that share a key value keep the state they would keep under Key. The
	// call is still all or nothing, on every limiter of this module: a
	// denied call charges no limit. Keys are bounded as Key is.
	Keys []string
	// Cost is how many units the call takes; zero means 1.
	Cost int64
	// Limits must all admit the call. If any denies it, none is charged.
	// At most [MaxLimits].
	Limits []Limit
	// Shared, when not nil, names the shared lines among Limits (see
	// [Rule.Shared]): Shared[i], when not empty, is the name of the line
	// limit i is, whose state is that of limit 0 of (Shared[i], Keys[i])
	// whatever the request's Name and i (see [Request.Line]), so every
	// request with the line shares it. A request with Shared has a key
	// per limit (Keys), len(Shared) is len(Limits), and no two of its
	// limits name the same line. Only a limiter that shares lines ([Abilities])
	// may be given one.
	Shared []string

	// Rule is the rule whose call this is, when a [Rule] made the request,
	// else nil. A Rule's Limits never change once in use, so a backend may
	// keep what it derives from them by rule (as [MemoryLimiter] keeps its
	// plans, and [Request.Validate] their validation), for requests whose
	// Limits are the rule's own: the same slice, not an override's. Hooks
	// see it too, so that they show keys as [Request.RedactedKey] does.
	Rule *Rule
}

// prepared returns the validation of the rule that made r, when r's name
// and limits are the rule's own; else nil.
func (r *Request) prepared() *rulePrep {
	if r.Rule == nil {
		return nil
	}
	p, _ := r.Rule.prep.Load().(*rulePrep)
	if p == nil {
		p = r.Rule.prepared() // the rule's first call validates its limits
	}
	if p.covers(r.Limits) && p.name == r.Name {
		return p
	}
	return nil
}

// Line returns where limit i's state belongs: the name and the index of
// the limit under that name and the limit's key. That is Name and i,
// except for a shared line: Shared[i] and 0. Every backend keys limit i's
// state by Line(i) and the limit's key.
func (r *Request) Line(i int) (name string, index int) {
	if i < len(r.Shared) && r.Shared[i] != "" {
		return r.Shared[i], 0
	}
	return r.Name, i
}

// Units returns the units the call takes of a limit that does not count
// calls: Cost, or 1 when Cost is zero. [Request.UnitsOf] tells a limit's.
func (r *Request) Units() int64 {
	if r.Cost == 0 {
		return 1
	}
	return r.Cost
}

// UnitsOf returns the units the call takes of its limit i: 1 when that
// limit counts calls ([Limit.PerCall]), else Units.
func (r *Request) UnitsOf(i int) int64 { return r.Limits[i].Units(r.Cost) }

// Validate reports a request that no limiter could decide: an empty name,
// no limits or more than [MaxLimits], an invalid limit, a negative cost
// or one a limit can never admit ([*CostError]), Keys of another length
// than Limits, Shared without Keys, of another length than Limits or naming a line
// twice.
// The error wraps
// [ErrInvalidLimit].
func (r *Request) Validate() error {
	return r.validate(r.prepared())
}

// validate is Validate, for a request whose rule's validation (when its
// limits are the rule's own) is prep.
func (r *Request) validate(prep *rulePrep) error {
	if r.Keys != nil && len(r.Keys) != len(r.Limits) {
		return fmt.Errorf("%w: %d keys for %d limits", ErrInvalidLimit, len(r.Keys), len(r.Limits))
	}
	if r.Shared != nil && (r.Keys == nil || len(r.Shared) != len(r.Limits)) {
		return fmt.Errorf("%w: %d shared names for %d limits (and a key per limit)", ErrInvalidLimit, len(r.Shared), len(r.Limits))
	}
	for i, name := range r.Shared {
		if name != "" && slices.Contains(r.Shared[:i], name) {
			return fmt.Errorf("%w: shared line %q twice", ErrInvalidLimit, name)
		}
	}
	if prep != nil && r.Cost >= 0 && r.Units() <= prep.capacity {
		return nil
	}
	if r.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidLimit)
	}
	if len(r.Limits) == 0 {
		return fmt.Errorf("%w: no limits", ErrInvalidLimit)
	}
	if len(r.Limits) > MaxLimits {
		return fmt.Errorf("%w: %d limits, more than %d", ErrInvalidLimit, len(r.Limits), MaxLimits)
	}
	if r.Cost < 0 {
		return fmt.Errorf("%w: negative cost %d", ErrInvalidLimit, r.Cost)
	}
	for _, l := range r.Limits {
		if err := l.validate(); err != nil {
			return err
		}
		if l.Units(r.Cost) > l.MaxCost() {
			return &CostError{Name: r.Name, Cost: r.Units(), Limit: l}
		}
	}
	return nil
}

// Decision is a limiter's answer for one [Request].
type Decision struct {
	// Allowed reports whether the call was admitted and charged.
	Allowed bool
	// Remaining is how many more units the limit at LimitIndex admits now.
	Remaining int64
	// RetryAfter is how long until the denied call would be admitted if
	// nobody else called, rounded up to the microsecond; zero when allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit at LimitIndex is fully
	// available again.
	ResetAfter time.Duration
	// Delay is how long an admitted call should wait before it proceeds,
	// so that calls leave at a steady rate (LeakyBucket; with several such
	// limits, the longest of their delays); zero otherwise.
	Delay time.Duration
	// LimitIndex is the index in Request.Limits of the limit the other fields
	// describe: when denied, the limit that denied the call (the one with
	// the longest RetryAfter); when allowed, the one with the fewest
	// remaining units.
	LimitIndex int
	// Source says what made the decision: the limiter's backend (the zero
	// value), its local deny cache, its in-process fallback, an override
	// that blocks the key, or a lease of the limit's units.
	Source Source
}

// Source is what made a [Decision].
type Source uint8

const (
	// SourceBackend is a decision of the limiter's backend: Redis for the
	// Redis limiter, the process for [NewMemory].
	SourceBackend Source = iota
	// SourceCache is a denial answered from the limiter's local deny cache:
	// a repeat of a denial its backend made, without asking it again.
	SourceCache
	// SourceFallback is a decision of the in-process fallback that stands
	// in while the backend cannot decide ([FailLocal]).
	SourceFallback
	// SourceOverride is a denial of a call that an override blocks
	// ([Block]), made without asking the limiter.
	SourceOverride
	// SourceLease is an admission from a lease: units of a limit with a
	// [Limit.Prefetch] that the backend charged ahead (see guard.Leases),
	// that limit being the decision's (LimitIndex; for a call of several
	// limits, the one with the fewest remaining units).
	SourceLease
	// SourceCooldown is a denial of a call of a line that cools: an
	// upstream asked to retry later (see [Rule.Cooldown]).
	SourceCooldown
	// SourceQueue is a denial of a call that waits its turn behind calls
	// that began to wait before it (see [OpTurn]); nothing was decided.
	SourceQueue
	// SourceBusy is a denial of a call that the limiter shed undecided:
	// its own client was saturated ([ErrBusy]), or its fallback had
	// carried back and was waiting for the other processes to do the same
	// before the backend decides again.
	SourceBusy
)

// String returns "backend", "cache", "fallback", "override", "lease",
// "cooldown", "queue" or "busy".
func (s Source) String() string {
	switch s {
	case SourceBusy:
		return "busy"
	case SourceQueue:
		return "queue"
	case SourceLease:
		return "lease"
	case SourceCooldown:
		return "cooldown"
	case SourceOverride:
		return "override"
	case SourceCache:
		return "cache"
	case SourceFallback:
		return "fallback"
	}
	return "backend"
}
