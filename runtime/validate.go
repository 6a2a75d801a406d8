package ratelimit

// Validate reports whether the limit can be decided by this runtime: a
// period of at least 1µs (or a calendar period, of FixedWindow, in a zone
// it can load), a positive threshold, an algorithm it implements,
// and Burst or Capacity only where the algorithm uses them, all within the
// ranges the algorithms compute exactly. The error wraps ErrInvalidLimit.
func (l Limit) Validate() error { return l.validate() }

// rulePrep is what validating a Rule's limits found, kept by the Rule so
// that its calls skip validating them again: a Rule must not change once
// in use.
type rulePrep struct {
	limits   []Limit // the limits validated, valid, with a name
	name     string  // the name validated with them
	capacity int64   // the least capacity among those that take the cost: the most a call may cost
}

// covers reports whether limits are those p validated (the same slice).
func (p *rulePrep) covers(limits []Limit) bool {
	return p != nil && len(limits) == len(p.limits) && &limits[0] == &p.limits[0]
}

// prepared returns the validation of r's limits, validating them on the
// first call, or nil when they are invalid (each call then reports why).
func (r *Rule) prepared() *rulePrep {
	if p, _ := r.prep.Load().(*rulePrep); p.covers(r.Limits) {
		return p
	}
	req := Request{Name: r.Name, Limits: r.Limits}
	if req.Validate() != nil {
		return nil
	}
	p := &rulePrep{limits: r.Limits, capacity: maxLimitValue, name: r.Name}
	for _, l := range r.Limits {
		if !l.PerCall {
			p.capacity = min(p.capacity, l.MaxCost())
		}
	}
	r.prep.Store(p)
	return p
}
