package ratelimit

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/denied"
	"github.com/ratelimitgen/ratelimitgen/internal/limitstate"
	"github.com/ratelimitgen/ratelimitgen/internal/memstate"
	"github.com/ratelimitgen/ratelimitgen/internal/monotime"
)

// shardCount splits a memory limiter's state so calls on different keys
// rarely wait for each other.
const shardCount = 64

// evictionSamples is how many entries a full shard looks at to choose one
// to evict, as Redis does for its approximated LRU.
const evictionSamples = 5

// MemoryLimiter decides calls in process memory, with the same algorithms
// and the same decisions as the Redis limiter (package redislimit) for the
// same sequence of calls.
// It is safe for concurrent use.
//
// Memory: a sliding log grows with the calls actually admitted, not with
// the threshold, keeping one 16-byte run per distinct admission time in its
// window; every other algorithm keeps a few integers per limit. About the
// WithMaxKeys bound of (name, key) pairs is kept (default
// [DefaultMaxKeys]): the pairs are split over 64 shards of n/64+1 pairs
// each, and a shard holds more only when one call with a key per line
// needs more new pairs in it at once (at most its number of lines). A pair
// whose limits are all idle is dropped as new pairs arrive, and when a
// shard is full with every pair still active the one that would expire
// soonest among a few sampled is evicted, which forgets its calls.
type MemoryLimiter struct {
	cfg    Config
	seed   maphash.Seed
	shards [shardCount]memoryShard
	slots  slotTable    // concurrency slots (memoryslots.go)
	cools  coolTable    // cooldowns (memorycool.go)
	queues memoryQueues // the queues of waiting calls (memoryqueue.go)
	// denials counts the denials of the process's rules (see
	// [OpCountDenial]).
	denials denied.Summary
	rules   ruleStore // the plans of the rules of its requests (memoryprep.go)
	ops     Handlers  // Do's
	can     Abilities // what Abilities reports
}

type memoryShard struct {
	mu sync.Mutex
	// entries maps the hash of a (name, key) pair to its state, chained
	// with the state of any other pair of the same hash.
	entries map[uint64]*memoryEntry
	_       [48]byte // keep shards on separate cache lines (64 bytes each)
}

// nameSeed hashes limit names, the same way in every limiter, so that a
// rule's name is hashed once (see memoryRule).
var nameSeed = maphash.MakeSeed()

// memoryEntry is the state of one (name, key) pair: one per limit index.
type memoryEntry struct {
	name, key string
	next      *memoryEntry // the next pair of the same hash, if any
	limits    []limitstate.State
	expiry    int64 // µs after which every window is empty
}

// NewMemory returns a limiter that keeps its state in this process.
func NewMemory(opts ...Option) *MemoryLimiter {
	l := &MemoryLimiter{cfg: NewConfig(opts...), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].entries = make(map[uint64]*memoryEntry)
	}
	l.ops = Handlers{
		Plan: l.plan, Reserve: l.Reserve, Adjust: l.Adjust, Peek: l.Peek, Reset: l.Reset,
		TakeSlot: l.ReserveSlot, RenewSlot: l.RenewSlot, GiveSlot: l.ReleaseSlot, PeekSlot: l.PeekSlot,
		Cool: l.Cool, Cooling: l.Cooling,
		Turn: l.AllowInTurn, SlotTurn: l.ReserveSlotInTurn, Dequeue: l.Dequeue, Waiting: l.Waiting,
		CountDenial: l.CountDenial, TopDenied: l.TopDenied,
		ReserveHeld: l.ReserveHeld, RefundHeld: l.RefundHeld,
	}
	l.can = Abilities{Ops: l.ops.Ops(), SharesLines: true, Config: &l.cfg}
	return l
}

// Do carries out op. See [Limiter].
func (l *MemoryLimiter) Do(ctx context.Context, op Op) (Result, error) {
	return l.ops.Do(ctx, l, &op)
}

// Abilities reports every operation but OpFallback (the limiter has no
// backend to stand in for), shared lines, and the limiter's Config. See
// [Limiter].
func (l *MemoryLimiter) Abilities() Abilities { return l.can }

// plan returns the limiter's fast path for r's calls. See [OpPlan].
func (l *MemoryLimiter) plan(r *Rule) Plan {
	count := func(key string, hashed bool) { l.CountDenial(r.Name, key, hashed) }
	return Plan{By: l, Decide: l.decideRule(r), CountDenial: count}
}

// Allow decides req. See [Limiter]. The requests of a [Rule] are decided
// against the plans made once for the rule's limits (see [Request.Rule]).
func (l *MemoryLimiter) Allow(ctx context.Context, req Request) (d Decision, err error) {
	if req.Keys != nil {
		_, err = l.decideKeys(ctx, &req, true, 0, &d)
		return d, err
	}
	d, _, err = l.reserve(ctx, req, true, 0)
	return d, err
}

// report passes d to the hook, with req's key bounded as key. It takes req
// by value so that only calls with a hook pay for the copy the hook's
// pointer makes escape.
func (l *MemoryLimiter) report(ctx context.Context, req Request, key string, d Decision) {
	req.Key = key // the hook sees the rule too, for Request.RedactedKey
	l.cfg.Hook.Decided(ctx, &req, d)
}

// decideRule returns the function that decides the calls of r against its
// plans, made once, without a Request: the limiter's fast path (see
// [Plan]); nil when r's limits are not valid.
func (l *MemoryLimiter) decideRule(r *Rule) func(ctx context.Context, key string, cost int64) (Decision, error) {
	if req := (Request{Name: r.Name, Limits: r.Limits, Rule: r}); req.Validate() != nil {
		return nil
	}
	mr := newMemoryRule(r.Name, r.Limits)
	return func(ctx context.Context, key string, cost int64) (d Decision, err error) {
		units := cost
		if units == 0 {
			units = 1
		}
		if units < 0 || units > mr.capacity {
			return l.Allow(ctx, Request{Name: mr.name, Key: key, Cost: cost, Limits: mr.limits, Rule: r}) // which says why not
		}
		// decidePair, by hand: Go does not inline it, and the call would
		// cost Rule.Check about 20 instructions (2%).
		bound := callkey.Bound(key)
		hash := mr.nameHash ^ maphash.String(l.seed, bound) // hashOf's, for mr's name
		now := l.now()
		shard := l.shardOf(hash)
		shard.mu.Lock()
		e := shard.entry(mr.name, bound, hash, len(mr.plans), now, l.cfg.MaxKeys/shardCount+1)
		if len(mr.plans) == 1 { // decidePlans' first case, by hand too
			e.decideOne(&mr.plans[0], units, now, true, &d)
		} else {
			e.decidePlans(mr.plans, units, now, true, &d)
		}
		shard.mu.Unlock()
		if l.cfg.Hook != nil {
			l.report(ctx, Request{Name: mr.name, Key: key, Cost: cost, Limits: mr.limits, Rule: r}, bound, d)
		}
		return d, nil
	}
}

// now returns the time in µs since the Unix epoch: the clock's, or the
// process's monotonic clock (see monotime.Micros).
func (l *MemoryLimiter) now() int64 {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now().UnixMicro()
	}
	return monotime.Micros()
}

// hashOf returns the hash of the pair of name and a bounded key, which
// picks the pair's shard and its slot there. The name's hash is mr's when
// mr was made for that name (a Rule's requests), which spares hashing it
// on every call.
func (l *MemoryLimiter) hashOf(name, key string, mr *memoryRule) uint64 {
	var nameHash uint64
	if mr != nil && mr.name == name {
		nameHash = mr.nameHash
	} else {
		nameHash = maphash.String(nameSeed, name)
	}
	return nameHash ^ maphash.String(l.seed, key)
}

// shardOf returns the shard that holds the pairs of the given hash.
func (l *MemoryLimiter) shardOf(hash uint64) *memoryShard {
	return &l.shards[hash%shardCount]
}

// locate validates req and returns its bounded key, the hash of its pair
// and its rule's memoryRule, if any (see ruleOf).
func (l *MemoryLimiter) locate(req *Request) (string, uint64, *memoryRule, error) {
	if err := req.Validate(); err != nil {
		return "", 0, nil, err
	}
	mr := l.ruleOf(req)
	key := callkey.Bound(req.Key)
	return key, l.hashOf(req.Name, key, mr), mr, nil
}

// lookup returns the state of name and key, or nil when there is none.
func (l *MemoryLimiter) lookup(name, key string) *memoryEntry {
	key = callkey.Bound(key)
	hash := l.hashOf(name, key, nil)
	shard := l.shardOf(hash)
	shard.mu.Lock()
	defer shard.mu.Unlock()
	return shard.find(name, key, hash)
}

// Len returns how many (name, key) pairs the limiter holds now.
func (l *MemoryLimiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for _, e := range s.entries {
			for ; e != nil; e = e.next {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// find returns the state of name and key, whose pair has the given hash,
// or nil when the shard holds none.
func (s *memoryShard) find(name, key string, hash uint64) *memoryEntry {
	for e := s.entries[hash]; e != nil; e = e.next {
		if e.name == name && e.key == key {
			return e
		}
	}
	return nil
}

// remove forgets the state of name and key, whose pair has the given
// hash, if the shard holds it.
func (s *memoryShard) remove(name, key string, hash uint64) {
	head := s.entries[hash]
	for p := &head; *p != nil; p = &(*p).next {
		if (*p).name == name && (*p).key == key {
			*p = (*p).next
			break
		}
	}
	if head == nil {
		delete(s.entries, hash)
	} else {
		s.entries[hash] = head
	}
}

// entry returns the state of name and key, whose pair has the given hash,
// making room for it if it is new.
func (s *memoryShard) entry(name, key string, hash uint64, limits int, now int64, max int) *memoryEntry {
	e := s.find(name, key, hash)
	if e == nil {
		s.makeRoom(now, max)
		// The key is cloned: not the larger string it may be cut from.
		e = &memoryEntry{name: name, key: strings.Clone(key), next: s.entries[hash]}
		s.entries[hash] = e
	}
	if len(e.limits) < limits {
		e.limits = append(e.limits, make([]limitstate.State, limits-len(e.limits))...)
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
	var victim *memoryEntry
	var victimHash uint64
	seen := 0
	for h, e := range s.entries { // map order is random: a sample
		if e.expiry+idleGrace <= now {
			s.remove(e.name, e.key, h)
		} else if victim == nil || e.expiry < victim.expiry {
			victim, victimHash = e, h
		}
		if seen++; seen == evictionSamples {
			break
		}
	}
	if len(s.entries) >= max && victim != nil {
		s.remove(victim.name, victim.key, victimHash)
	}
}

// plansOf returns the plans of req's limits: those of its rule, made
// once, when mr (the rule's memoryRule) is not nil and hold is 0, else made
// now in buf (on the caller's stack for up to 4 limits), those of
// SlidingLog limits held hold µs (see ReserveHeld).
func plansOf(req *Request, mr *memoryRule, buf *[4]limitstate.Plan, hold int64) []limitstate.Plan {
	if mr != nil && hold == 0 {
		return mr.plans
	}
	plans := buf[:0]
	for _, lim := range req.Limits {
		plans = append(plans, statePlan(lim, hold))
	}
	return plans
}

// decidePair decides a call of units against plans for the pair of name
// and a bounded key, whose hash is hash, under its shard's lock and at the
// limiter's time, which it returns: the pair is made if it is new, and an
// admitted call is charged. d describes the decision (see decidePlans).
func (l *MemoryLimiter) decidePair(name, key string, hash uint64, plans []limitstate.Plan, units int64, d *Decision) int64 {
	now := l.now()
	shard := l.shardOf(hash)
	shard.mu.Lock()
	e := shard.entry(name, key, hash, len(plans), now, l.cfg.MaxKeys/shardCount+1)
	e.decidePlans(plans, units, now, true, d)
	shard.mu.Unlock()
	return now
}

// decidePlans checks every limit of plans and, with charge set, charges
// them all only if all admit. The decision, in d, describes the denying
// limit with the longest retry, or when admitted the limit with the fewest
// remaining units, with the longest delay of all.
func (e *memoryEntry) decidePlans(plans []limitstate.Plan, cost, now int64, charge bool, d *Decision) {
	if len(plans) == 1 {
		e.decideOne(&plans[0], cost, now, charge, d)
		return
	}
	decideLimits(plans, nil, nil, e, cost, now, charge, d)
}

// decideLimits decides a call against plans, limit i's state being that
// of entries[i] at index[i], or of one at i when entries is nil: every limit must admit it,
// and d describes the denying limit with the longest RetryAfter, or the
// admitting one with the fewest units left. When charge is set, an
// admitted call is charged to every limit.
func decideLimits(plans []limitstate.Plan, entries []*memoryEntry, index []int, one *memoryEntry, cost, now int64, charge bool, d *Decision) {
	*d = Decision{Allowed: true}
	var delay time.Duration
	var r limitstate.Decision
	for i := range plans {
		e, j := one, i
		if entries != nil {
			e, j = entries[i], index[i]
		}
		ok := e.limits[j].Check(&plans[i], now, plans[i].Units(cost), &r)
		switch {
		case !ok && (d.Allowed || r.RetryAfter > d.RetryAfter):
			*d = decisionOf(&r)
			d.Allowed, d.LimitIndex = false, i
		case ok && d.Allowed && (i == 0 || r.Remaining < d.Remaining):
			*d = decisionOf(&r)
			d.Allowed, d.LimitIndex = true, i
		}
		delay = max(delay, r.Delay)
	}
	if !d.Allowed {
		d.Delay = 0
		return
	}
	d.Delay = delay
	if !charge {
		return
	}
	for i := range plans {
		e, j := one, i
		if entries != nil {
			e, j = entries[i], index[i]
		}
		if exp := e.limits[j].Charge(&plans[i], now, plans[i].Units(cost)); exp > e.expiry {
			e.expiry = exp
		}
	}
}

// decideOne is decidePlans for a single limit, the common case.
func (e *memoryEntry) decideOne(p *limitstate.Plan, cost, now int64, charge bool, d *Decision) {
	s := &e.limits[0]
	cost = p.Units(cost)
	var r limitstate.Decision
	if !charge {
		ok := s.Check(p, now, cost, &r)
		*d = decisionOf(&r)
		if d.Allowed = ok; !ok {
			d.Delay = 0
		}
		return
	}
	ok, exp := s.Decide(p, now, cost, &r)
	*d = decisionOf(&r)
	if d.Allowed = ok; !ok {
		d.Delay = 0
		return
	}
	if exp > e.expiry {
		e.expiry = exp
	}
}

// decisionOf returns the decision that one limit's state told of a call,
// r, as the limiter returns it: not yet allowed, of the limit at index 0.
func decisionOf(r *limitstate.Decision) Decision {
	return Decision{Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter, Delay: r.Delay}
}

// The tests of package redislimit compare Redis keys with the twin's state.
func init() {
	memstate.Lookup = func(limiter any, name, key string) (memstate.State, bool) {
		e := limiter.(*MemoryLimiter).lookup(name, key)
		if e == nil {
			return memstate.State{}, false
		}
		s := memstate.State{Expiry: e.expiry}
		for i := range e.limits {
			end, count, prev := e.limits[i].Window()
			s.Windows = append(s.Windows, memstate.Window{StateEnd: end, Count: count, Prev: prev})
		}
		return s, true
	}
}

// CountDenial counts a denial for TopDenied. See [OpCountDenial].
func (l *MemoryLimiter) CountDenial(name, key string, hashed bool) {
	l.denials.Add(name, key, hashed, 1, 0, l.wallNow())
}

// TopDenied returns the most-denied keys of the limiter's process. See
// [OpTopDenied].
func (l *MemoryLimiter) TopDenied(_ context.Context, n int) ([]DeniedKey, error) {
	return deniedKeys(l.denials.Top(n, l.wallNow())), nil
}

// wallNow returns the time on the limiter's clock.
func (l *MemoryLimiter) wallNow() time.Time {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now()
	}
	return time.Now()
}

// deniedKeys returns entries as TopDenied lists them, keys redacted.
func deniedKeys(entries []denied.Entry) []DeniedKey {
	out := make([]DeniedKey, len(entries))
	for i, e := range entries {
		out[i] = DeniedKey{Name: e.Name, Key: RedactKey(e.Key, e.Hashed), Kept: e.Key, Denials: e.Count, Error: e.Error}
	}
	return out
}
