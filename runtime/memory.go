package ratelimit

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// DefaultMaxKeys is how many (name, key) pairs a memory limiter keeps
// unless [WithMaxKeys] says otherwise.
const DefaultMaxKeys = 1 << 20

// shardCount splits a memory limiter's state so calls on different keys
// rarely wait for each other.
const shardCount = 64

// evictionSamples is how many entries a full shard looks at to choose one
// to evict, as Redis does for its approximated LRU.
const evictionSamples = 5

// MemoryLimiter decides calls in process memory, with the same algorithms
// and the same decisions as [RedisLimiter] for the same sequence of calls.
// It is safe for concurrent use.
//
// Memory: a sliding log grows with the calls actually admitted, not with
// the threshold, keeping one 16-byte run per distinct admission time in its
// window; every other algorithm keeps a few integers per limit. At most the
// WithMaxKeys bound of (name, key) pairs is kept (default
// [DefaultMaxKeys]); a pair whose limits are all idle is dropped as new
// pairs arrive, and when the bound is reached with every pair still active
// the one that would expire soonest among a few sampled is evicted, which
// forgets its calls.
type MemoryLimiter struct {
	config
	seed   maphash.Seed
	shards [shardCount]memoryShard
}

type memoryShard struct {
	mu      sync.Mutex
	entries map[entryKey]*memoryEntry
	_       [48]byte // keep shards on separate cache lines (64 bytes each)
}

type entryKey struct {
	name, key string
}

// memoryEntry is the state of one (name, key) pair: one per limit index.
type memoryEntry struct {
	limits []limitState
	expiry int64 // µs after which every window is empty
}

// limitState is the state of one limit of a (name, key) pair. It mirrors
// the Redis key of the limit: a sliding log (a list), the counters of the
// window algorithms (a string; see fixedwindow.go) or the theoretical arrival
// time of the bucket algorithms (a string; see gcra.go).
type limitState struct {
	logState
	a, b, c int64
	// alg is the algorithm the state belongs to. A limit whose algorithm
	// changes starts afresh, as in Redis, where each algorithm has its own
	// key (see storageKey).
	alg Algorithm
}

// memoryPlan is a limit as the memory limiter decides it: its plan (see
// script.go) and, for a bucket, the bucket's depth and one unit's emission
// interval in µs, each a whole part and a fraction in 1/threshold µs. A
// Rule's plans are made once (see rulePrep), a Request's on each call.
type memoryPlan struct {
	plan
	depth, depthFrac int64 // capacity × period / threshold
	unit, unitFrac   int64 // period / threshold
}

func memoryPlanOf(lim Limit) memoryPlan {
	p := memoryPlan{plan: planOf(lim)}
	if p.Algorithm == TokenBucket || p.Algorithm == LeakyBucket || p.Algorithm == GCRA {
		p.depth, p.depthFrac = mulDivRem(p.Capacity, p.Period, p.Threshold)
		p.unit, p.unitFrac = p.Period/p.Threshold, p.Period%p.Threshold
	}
	return p
}

// check decides cost units at now for the limit p without charging them.
func (s *limitState) check(p *memoryPlan, now, cost int64) (bool, Decision) {
	if s.alg != p.Algorithm {
		*s = limitState{alg: p.Algorithm}
	}
	switch p.Algorithm {
	case FixedWindow:
		return s.fixedCheck(p.Period, p.Threshold, now, cost)
	case SlidingWindow:
		return s.slidingCheck(p.Period, p.Threshold, now, cost)
	case TokenBucket, GCRA, LeakyBucket:
		return s.tatCheck(p, now, cost)
	}
	return s.logState.check(p.Period, p.Threshold, now, cost)
}

// charge charges cost units that check admitted and returns when the
// limit's state stops mattering (µs).
func (s *limitState) charge(p *memoryPlan, now, cost int64) int64 {
	switch p.Algorithm {
	case FixedWindow:
		return s.fixedCharge(p.Period, now, cost)
	case SlidingWindow:
		return s.slidingCharge(p.Period, now, cost)
	case TokenBucket, GCRA, LeakyBucket:
		return s.tatCharge(p, now, cost)
	}
	return s.logState.charge(p.Period, now, cost)
}

// NewMemory returns a limiter that keeps its state in this process.
func NewMemory(opts ...Option) *MemoryLimiter {
	return newMemory(newConfig(opts))
}

// newMemory returns a memory limiter configured by c.
func newMemory(c config) *MemoryLimiter {
	l := &MemoryLimiter{config: c, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].entries = make(map[entryKey]*memoryEntry)
	}
	return l
}

// Allow decides req. See [Limiter].
func (l *MemoryLimiter) Allow(ctx context.Context, req Request) (Decision, error) {
	ek, shard, err := l.locate(&req)
	if err != nil {
		return Decision{}, err
	}
	now := l.now()
	shard.mu.Lock()
	e := shard.entry(ek, len(req.Limits), now, l.maxKeys/shardCount+1)
	d := e.decide(&req, now, true)
	shard.mu.Unlock()
	if l.hook != nil {
		l.report(ctx, req, d)
	}
	return d, nil
}

// report passes d to the hook. It takes req by value so that only calls
// with a hook pay for the copy the hook's pointer makes escape.
func (l *MemoryLimiter) report(ctx context.Context, req Request, d Decision) {
	req.prep = nil // the hook sees the request as its caller could build it
	l.hook.Decided(ctx, &req, d)
}

// now returns the time in µs since the Unix epoch: the clock's, or the
// wall clock's when the process started moved on by its monotonic clock,
// which is read alone (about half the cost of time.Now) and never steps.
func (l *MemoryLimiter) now() int64 {
	if l.clock != nil {
		return l.clock.Now().UnixMicro()
	}
	return monoBaseMicro + int64(time.Since(monoBase)/time.Microsecond)
}

// monoBaseMicro is monoBase on the wall clock, in µs since the Unix epoch.
var monoBaseMicro = monoBase.UnixMicro()

func (l *MemoryLimiter) shardOf(k entryKey) uint64 {
	return (maphash.String(l.seed, k.name)*31 + maphash.String(l.seed, k.key)) % shardCount
}

// locate validates req, bounds its key and returns the key of its state
// and the shard that holds it.
func (l *MemoryLimiter) locate(req *Request) (entryKey, *memoryShard, error) {
	if err := req.validate(); err != nil {
		return entryKey{}, nil, err
	}
	req.Key = boundKey(req.Key)
	ek := entryKey{req.Name, req.Key}
	return ek, &l.shards[l.shardOf(ek)], nil
}

// Len returns how many (name, key) pairs the limiter holds now.
func (l *MemoryLimiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return n
}

// entry returns the state of k, making room for it if it is new.
func (s *memoryShard) entry(k entryKey, limits int, now int64, max int) *memoryEntry {
	e, ok := s.entries[k]
	if !ok {
		s.makeRoom(now, max)
		e = &memoryEntry{}
		k.key = strings.Clone(k.key) // not the larger string it may be cut from
		s.entries[k] = e
	}
	if len(e.limits) < limits {
		e.limits = append(e.limits, make([]limitState, limits-len(e.limits))...)
	}
	return e
}

// idleGrace is how long (µs) an entry is kept after its state stops
// mattering: a clock that steps back by less still finds it, as it finds a
// Redis key, which outlives its state by a second (a window's key, on a
// pinned clock, until the clock passes its end again). Without it, an
// entry dropped while another process's clock ran ahead would be missed by
// a call from one behind, where Redis still holds the state.
const idleGrace = int64(time.Second / time.Microsecond)

// makeRoom drops a few idle entries and, if the shard is still full,
// evicts the sampled entry that would expire soonest. Each new entry pays
// for a constant amount of this work.
func (s *memoryShard) makeRoom(now int64, max int) {
	var victim *entryKey
	var victimExpiry int64
	seen := 0
	for k, e := range s.entries { // map order is random: a sample
		if e.expiry+idleGrace <= now {
			delete(s.entries, k)
		} else if victim == nil || e.expiry < victimExpiry {
			victim, victimExpiry = &k, e.expiry
		}
		if seen++; seen == evictionSamples {
			break
		}
	}
	if len(s.entries) >= max && victim != nil {
		delete(s.entries, *victim)
	}
}

// decide checks every limit and, with charge set, charges them all only
// if all admit. The decision describes the denying limit with the longest
// retry, or when admitted the limit with the fewest remaining units, with
// the longest delay of all.
func (e *memoryEntry) decide(req *Request, now int64, charge bool) Decision {
	var made [4]memoryPlan // the plans of a request that no Rule made
	plans := req.prep.plansOf(req.Limits)
	if plans == nil {
		plans = made[:0]
		for _, lim := range req.Limits {
			plans = append(plans, memoryPlanOf(lim))
		}
	}
	cost := req.cost()
	d := Decision{Allowed: true}
	var delay time.Duration
	for i := range plans {
		ok, r := e.limits[i].check(&plans[i], now, cost)
		switch {
		case !ok && (d.Allowed || r.RetryAfter > d.RetryAfter):
			d = r
			d.Allowed, d.Limit = false, i
		case ok && d.Allowed && (i == 0 || r.Remaining < d.Remaining):
			d = r
			d.Allowed, d.Limit = true, i
		}
		delay = max(delay, r.Delay)
	}
	if !d.Allowed {
		d.Delay = 0
		return d
	}
	d.Delay = delay
	if !charge {
		return d
	}
	for i := range plans {
		if exp := e.limits[i].charge(&plans[i], now, cost); exp > e.expiry {
			e.expiry = exp
		}
	}
	return d
}
