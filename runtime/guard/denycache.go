package guard

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// denyNameSlots is how many limit names a deny cache tells apart at once
// (two per hash bucket); a name pushed out forgets its denials.
const denyNameSlots = 1 << 12

// denyCache remembers a backend's recent denials so that it can repeat
// them without asking the backend (see [WithDenyCache]). Its doc speaks of
// Redis, the backend it was made for; it holds for any backend that
// decides as the in-process limiter does.
//
// Why a repeated denial is Redis's answer. It remembers only a denial that
// left nothing: Remaining 0 at the limit that denied the call (the one
// with the longest RetryAfter), for a call of cost 1, or of any cost when
// that limit is a fixed window. Until its RetryAfter r runs out, no call
// of that name and key can be admitted anywhere: every call takes at least
// one unit, which that limit has not got until the first unit frees, at
// r for a cost-1 call, or at a fixed window's end, its RetryAfter whatever
// the cost. So nobody charges any of the call's limits meanwhile (a
// denied call charges nothing), their state only moves on with time, and
// a repeat at t0 + e answers exactly what Redis would: not allowed,
// Remaining 0, RetryAfter r − e and ResetAfter (of that same limit) less e
// (the algorithms' reset and retry times stay put while the state does).
// A call of another cost against a limit that is not a fixed window, whose
// RetryAfter the denial does not tell, is asked of Redis; so is a call of
// several limits of a larger cost than the denied one's, which another
// limit may deny with a longer RetryAfter (Redis's answer then).
//
// Times: the cache reads the process's monotonic clock in µs (or the
// [ratelimit.WithClock] clock's, at which the scripts decide: then a
// repeat equals Redis's answer to the µs). It holds a denial from the
// moment its call was sent, before Redis decided, for at most r less a
// 1024th of r (a process clock that runs slow against the server's) and
// less the backend's slack ([WithDenySlack]: a millisecond for a Redis
// window's script on the server's clock, which tells times from the start
// of the server's millisecond), so it never repeats a denial past Redis's own retry
// time; and it counts RetryAfter and ResetAfter from the moment the answer
// came, after Redis decided, so a repeat never tells a client to retry
// earlier than Redis would, and later by at most the call's round trip.
//
// What it cannot see: state dropped out of band (FLUSHALL, a restart
// without persistence, a failover to a replica that lagged, an evicted
// key, a DEL, a Reset in another process), and calls decided
// against other limits for the same keys (an override seen by some
// processes and not yet by others). So a denial is held at most the
// limiter's deny hold ([WithDenyHold], a second by default): within that
// bound every process asks Redis again.
//
// With [ratelimit.WithClock] (tests), a call at a later time may drop
// state (a log's entries) that counts at an earlier one, so the cache
// answers only at a time no earlier than any call the limiter sent (see
// DenyCache.now).
//
// Entries are keyed by (name, key) and by the limits: each name's current
// limits have a generation, and a call with other limits than the name's
// (an override changed them) gives the name a new one, so every denial
// made under the old limits is forgotten (limits that change back do not
// bring them back: calls under other limits may have drained the state).
// A Reset forgets the name's entries (see forget).
//
// The cache is lock-free: a fixed array of pointers to immutable entries,
// two ways per hash bucket, so its memory is bounded whatever the number
// of keys (a new denial takes the place of the older of two, or of an
// expired one), and a lookup that misses allocates nothing.
type denyCache struct {
	seed  maphash.Seed
	names [denyNameSlots]atomic.Pointer[denyName]
	slots []atomic.Pointer[denial]
	gen   atomic.Uint64 // the last generation given to a name's limits
}

// denyName is the current limits of a name, and their generation.
type denyName struct {
	name   string
	limits []ratelimit.Limit
	gen    uint64
}

// denial is a remembered denial of one key under one generation of its
// name's limits, with Remaining 0. Times are µs on the cache's clock (see
// DenyCache.now).
type denial struct {
	gen     uint64
	key     string
	upTo    int64 // it holds for calls of cost up to upTo (see remember)
	until   int64 // the denial holds while now < until
	retryAt int64 // when the call would be admitted, as Redis said
	resetAt int64
	limit   int
}

// denyProbe is what a lookup learnt for remembering the call's denial.
type denyProbe struct {
	sent  int64     // the time the call was sent, in µs
	hn    uint64    // the name's hash
	named *denyName // the name's record when its limits were the call's
}

// newDenyCache returns a cache of about entries denials (a power of two,
// at least 2), or nil when entries is not positive.
func newDenyCache(entries int) *denyCache {
	if entries <= 0 {
		return nil
	}
	n := 1 << bits.Len(uint(max(entries, 2)-1))
	return &denyCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[denial], n)}
}

// lookup returns the remembered denial of req at now, if any; else what
// remember needs to remember req's denial.
func (c *denyCache) lookup(req *ratelimit.Request, now int64) (ratelimit.Decision, denyProbe, bool) {
	p := denyProbe{sent: now, hn: maphash.String(c.seed, req.Name)}
	rec, slot := c.name(p.hn, req.Name)
	if rec == nil {
		return ratelimit.Decision{}, p, false
	}
	if !sameLimits(rec.limits, req.Limits) {
		// The name's limits changed: forget the denials made under the old.
		slot.CompareAndSwap(rec, nil)
		return ratelimit.Decision{}, p, false
	}
	p.named = rec
	i := c.bucket(rec.gen, req.Key)
	cost := req.Units()
	for w := range 2 {
		e := c.slots[i+w].Load()
		if e != nil && e.gen == rec.gen && e.key == req.Key && cost <= e.upTo && now < e.until {
			return e.decision(now), p, true
		}
	}
	return ratelimit.Decision{}, p, false
}

// held returns the denial of req's key the cache holds at now, whatever
// the call's cost, without taking part in any call.
func (c *denyCache) held(req *ratelimit.Request, now int64) (*denial, bool) {
	rec, _ := c.name(maphash.String(c.seed, req.Name), req.Name)
	if rec == nil || !sameLimits(rec.limits, req.Limits) {
		return nil, false
	}
	i := c.bucket(rec.gen, req.Key)
	for w := range 2 {
		if e := c.slots[i+w].Load(); e != nil && e.gen == rec.gen && e.key == req.Key && now < e.until {
			return e, true
		}
	}
	return nil, false
}

// name returns the record of name, or nil, and the slot that holds it or
// would.
func (c *denyCache) name(hn uint64, name string) (*denyName, *atomic.Pointer[denyName]) {
	i := hn & (denyNameSlots - 2)
	for w := range uint64(2) {
		if rec := c.names[i+w].Load(); rec != nil && rec.name == name {
			return rec, &c.names[i+w]
		}
	}
	return nil, nil
}

// forget drops every denial remembered for name, of every key (see
// DenyCache.Reset): its record goes, so the next denial of the name
// starts a new generation, and a denial of a call looked up under the old
// record is not remembered (remember finds the record gone).
func (c *denyCache) forget(name string) {
	if rec, slot := c.name(maphash.String(c.seed, name), name); rec != nil {
		slot.CompareAndSwap(rec, nil)
	}
}

// bucket returns the index of the first of the two slots of key under
// generation gen.
func (c *denyCache) bucket(gen uint64, key string) int {
	h := maphash.String(c.seed, key) ^ gen*0x9E3779B97F4A7C15
	return int(h & uint64(len(c.slots)-2))
}

// remember keeps d, the denial of req made by a call sent as p says and
// answered at recv, when it is one the cache can repeat (see denyCache):
// for at most hold, and slack and a 1024th of its RetryAfter less than
// its RetryAfter.
func (c *denyCache) remember(req *ratelimit.Request, p denyProbe, d ratelimit.Decision, recv int64, slack, hold time.Duration) {
	if d.Remaining != 0 || d.LimitIndex < 0 || d.LimitIndex >= len(req.Limits) {
		return
	}
	// A window's denial (limitfacts.Window) holds for a call of any cost;
	// of several limits, only up to the call's, as another limit may deny
	// a larger cost with a longer RetryAfter, which is then Redis's answer.
	upTo := int64(1)
	switch {
	case factsOf(req.Limits[d.LimitIndex]).State != limitfacts.Window:
		if req.Units() != 1 {
			return
		}
	case len(req.Limits) == 1:
		upTo = math.MaxInt64
	default:
		upTo = req.Units()
	}
	held := min(d.RetryAfter-d.RetryAfter/1024-slack, hold).Microseconds()
	if held <= 0 {
		return
	}
	rec := p.named
	if rec == nil {
		if rec = c.adopt(req, p.hn); rec == nil {
			return
		}
	} else if cur, _ := c.name(p.hn, req.Name); cur != rec {
		return // the limits changed (or the name was pushed out) meanwhile
	}
	e := &denial{
		gen: rec.gen, key: req.Key, upTo: upTo,
		until:   p.sent + held,
		retryAt: recv + d.RetryAfter.Microseconds(), resetAt: recv + d.ResetAfter.Microseconds(),
		limit: d.LimitIndex,
	}
	i := c.bucket(rec.gen, req.Key)
	c.slots[i+c.way(i, e, p.sent)].Store(e)
}

// adopt returns the record of req's name and limits, making one if the
// name has none, or nil when the name has other limits now.
func (c *denyCache) adopt(req *ratelimit.Request, hn uint64) *denyName {
	if rec, _ := c.name(hn, req.Name); rec != nil {
		if !sameLimits(rec.limits, req.Limits) {
			return nil
		}
		return rec
	}
	rec := &denyName{name: req.Name, limits: append([]ratelimit.Limit(nil), req.Limits...), gen: c.gen.Add(1)}
	i := hn & (denyNameSlots - 2)
	w := uint64(0)
	a, b := c.names[i].Load(), c.names[i+1].Load()
	if a != nil && (b == nil || b.gen < a.gen) {
		w = 1 // the empty way, else the older name's
	}
	old := a
	if w == 1 {
		old = b
	}
	if !c.names[i+w].CompareAndSwap(old, rec) {
		return nil // another call got there first; its denial is remembered
	}
	return rec
}

// way returns which of the two slots from i the denial e takes at now:
// the one of its key; else an empty or expired one; else the one that
// expires first.
func (c *denyCache) way(i int, e *denial, now int64) int {
	a, b := c.slots[i].Load(), c.slots[i+1].Load()
	for w, o := range [2]*denial{a, b} {
		if o != nil && o.gen == e.gen && o.key == e.key {
			return w
		}
	}
	if a == nil || a.until <= now || b != nil && b.until > now && a.until <= b.until {
		return 0
	}
	return 1
}

// decision is the denial e repeated at now: what is left of the RetryAfter
// and ResetAfter Redis told, in µs as the scripts tell them.
func (e *denial) decision(now int64) ratelimit.Decision {
	left := func(at int64) time.Duration {
		return time.Duration(max(at-now, 0)) * time.Microsecond
	}
	return ratelimit.Decision{
		RetryAfter: left(e.retryAt),
		ResetAfter: left(e.resetAt),
		LimitIndex: e.limit,
		Source:     ratelimit.SourceCache,
	}
}

// sameLimits reports whether a and b are the same limits.
func sameLimits(a, b []ratelimit.Limit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// factsOf returns the facts of l's algorithm, which l names validly or
// leaves to the default.
func factsOf(l ratelimit.Limit) limitfacts.Algorithm {
	a, _ := limitfacts.Lookup(string(l.AlgorithmOrDefault()))
	return a
}
