package ratelimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/limitstate"
)

// maxKeptRules bounds how many rules a memory limiter keeps plans for
// (see ruleStore).
const maxKeptRules = 1024

// frontBits is the log2 of the number of slots of ruleStore's front.
const frontBits = 6

// memoryRule is what the memory limiter derives from a rule's limits, once:
// the limits and name it was made for, the name's hash (with nameSeed), the
// limits' plans, and the most a call may cost (the least MaxCost of the
// limits that take the cost). It never changes once made.
type memoryRule struct {
	rule     *Rule // the rule it is kept for, nil for none
	limits   []Limit
	name     string
	nameHash uint64
	plans    []limitstate.Plan
	capacity int64
}

// newMemoryRule derives the memoryRule of name and limits, which are valid.
func newMemoryRule(name string, limits []Limit) *memoryRule {
	m := &memoryRule{limits: limits, name: name, nameHash: maphash.String(nameSeed, name), capacity: limitfacts.MaxValue}
	m.plans = make([]limitstate.Plan, len(limits))
	for i, lim := range limits {
		m.plans[i] = statePlan(lim, 0)
		if !lim.PerCall {
			m.capacity = min(m.capacity, lim.MaxCost())
		}
	}
	return m
}

// statePlan returns the plan of lim, a valid limit, whose units, if it keeps
// them in a log, weigh hold µs past a period (see limitstate.NewPlan).
func statePlan(lim Limit, hold int64) limitstate.Plan {
	facts := limitfacts.Limit{
		Period: lim.Period, Calendar: lim.Calendar, TZ: lim.TZ, Threshold: lim.Threshold,
		Algorithm: string(lim.Algorithm), Burst: lim.Burst, Capacity: lim.Capacity,
	}
	return limitstate.NewPlan(facts, lim.PerCall, hold)
}

// covers reports whether m was made for name and limits (the same slice).
func (m *memoryRule) covers(name string, limits []Limit) bool {
	return m != nil && len(limits) == len(m.limits) && len(limits) > 0 && &limits[0] == &m.limits[0] && m.name == name
}

// ruleStore keeps the memoryRule of the rules whose requests a memory
// limiter decides (see [Request.Rule]), so that their plans are made once
// rather than on every call. It keeps at most maxKeptRules: a new rule
// past that empties it first, and the rules still in use are derived again
// on their next call. So a program that makes rules as it goes keeps the
// plans of a bounded number of them, and one with more rules in use than
// the bound decides them the same, only deriving plans more often. A front
// of 1<<frontBits slots, one per rule by its address, holds the rule last
// found in each, which spares most calls the map's hashing.
type ruleStore struct {
	front [1 << frontBits]atomic.Pointer[memoryRule]
	m     sync.Map   // *Rule → *memoryRule
	mu    sync.Mutex // held to add to m, which keeps n exact
	n     int        // how many rules m holds
}

// slotOf returns r's slot in the front.
func (s *ruleStore) slotOf(r *Rule) *atomic.Pointer[memoryRule] {
	const golden = 0x9E3779B97F4A7C15 // Fibonacci hashing of the address
	return &s.front[uint64(uintptr(unsafe.Pointer(r)))*golden>>(64-frontBits)]
}

// load returns the memoryRule kept for r, or nil.
func (s *ruleStore) load(r *Rule) *memoryRule {
	slot := s.slotOf(r)
	if m := slot.Load(); m != nil && m.rule == r {
		return m
	}
	v, _ := s.m.Load(r)
	m, _ := v.(*memoryRule)
	if m != nil {
		slot.Store(m)
	}
	return m
}

// keep keeps m as r's, replacing what was kept for it, after emptying the
// store when r is new and the store holds maxKeptRules already.
func (s *ruleStore) keep(r *Rule, m *memoryRule) {
	m.rule = r
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m.Load(r); !ok {
		if s.n >= maxKeptRules {
			s.m.Clear()
			for i := range s.front {
				s.front[i].Store(nil)
			}
			s.n = 0
		}
		s.n++
	}
	s.m.Store(r, m)
	s.slotOf(r).Store(m)
}

// len returns how many rules the store keeps.
func (s *ruleStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// ruleOf returns the memoryRule of req, a valid request, when req's name
// and limits are its rule's own (see [Request.Rule]): the one kept, or
// one derived now and kept. It returns nil for a request without a rule or
// whose limits are not the rule's (an override's).
func (l *MemoryLimiter) ruleOf(req *Request) *memoryRule {
	r := req.Rule
	if r == nil {
		return nil
	}
	if m := l.rules.load(r); m.covers(req.Name, req.Limits) {
		return m
	}
	if len(req.Limits) == 0 || len(r.Limits) != len(req.Limits) || &r.Limits[0] != &req.Limits[0] || r.Name != req.Name {
		return nil
	}
	m := newMemoryRule(req.Name, req.Limits)
	l.rules.keep(r, m)
	return m
}

// keptRuleOf is ruleOf without deriving: the memoryRule kept for req's
// rule when it covers req, else nil. req need not be valid.
func (l *MemoryLimiter) keptRuleOf(req *Request) *memoryRule {
	if req.Rule == nil {
		return nil
	}
	if m := l.rules.load(req.Rule); m.covers(req.Name, req.Limits) {
		return m
	}
	return nil
}
