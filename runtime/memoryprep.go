package ratelimit

import "hash/maphash"

// memoryPrep is what the memory limiter derives from a rule's validated
// limits, once: the name's hash (with nameSeed) and the limits' plans.
type memoryPrep struct {
	nameHash uint64
	plans    []memoryPlan
}

// memory returns p's memoryPrep, making it on the first call: the core
// validates a rule for every backend, and only the memory limiter pays
// for its plans. Two made at once are alike; the first stored is kept.
func (p *rulePrep) memory() *memoryPrep {
	if m := p.mem.Load(); m != nil {
		return m
	}
	m := &memoryPrep{nameHash: maphash.String(nameSeed, p.name)}
	for _, l := range p.limits {
		m.plans = append(m.plans, memoryPlanOf(l))
	}
	p.mem.CompareAndSwap(nil, m)
	return p.mem.Load()
}
