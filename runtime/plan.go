package ratelimit

import (
	"context"
	"reflect"
	"sync/atomic"
	"unsafe"
)

// ruleFast is the decide function of a limiter's [Plan] for a rule's
// calls, kept with the rule, and what check asks of every call
// before it takes that path.
type ruleFast struct {
	limiter limiterWords // a pointer's: the words tell it apart
	limits  []Limit      // the rule's limits it decides
	decide  func(ctx context.Context, key string, cost int64) (Decision, error)
	count   func(key string, hashed bool) // the plan's CountDenial
	direct  bool                          // decide is not nil, and the limits hold no concurrency limit (see Rule.Reserve) and no cooldown
	config  *Config                       // limiter's, whose Overrides may replace the limits
}

// limiterWords are the two words of a Limiter: its type's and its value's.
// For a limiter that is a pointer, they are equal exactly when the
// limiters are, and comparing them costs no call into the runtime.
type limiterWords struct{ typ, value unsafe.Pointer }

// wordsOf returns limiter's words.
func wordsOf(limiter Limiter) limiterWords { return *(*limiterWords)(unsafe.Pointer(&limiter)) }

// fastDecide returns the function that decides r's calls on limiter,
// with what check must know of it (its decide is nil when the limiter
// has no plan for r: see [Plan]), or nil when r has no limits:
// the one kept with r when it was made for limiter, else a new one.
func (r *Rule) fastDecide(limiter Limiter) *ruleFast {
	if f := r.keptFast(limiter); f != nil {
		return f
	}
	return r.makeFast(limiter)
}

// keptFast returns the function kept with r for limiter, or nil when none
// is.
func (r *Rule) keptFast(limiter Limiter) *ruleFast {
	if f := (*ruleFast)(atomic.LoadPointer(&r.fast)); f != nil && f.limiter == wordsOf(limiter) && f.covers(r.Limits) {
		return f
	}
	return nil
}

// makeFast is fastDecide without a kept function: it asks limiter for
// one, and keeps it for the next calls when limiter is a pointer (as a
// limiter with plans should be: another is asked on every call).
func (r *Rule) makeFast(limiter Limiter) *ruleFast {
	abilities := limiter.Abilities()
	plans := abilities.Can(OpPlan)
	kept := reflect.TypeOf(limiter).Kind() == reflect.Pointer
	if len(r.Limits) == 0 || !plans && !kept {
		return nil
	}
	// A nil decide is kept too: a limiter is asked for a plan once per
	// rule, and one without plans is not asked again.
	f := &ruleFast{limiter: wordsOf(limiter), limits: r.Limits, config: abilities.Config}
	if plans {
		p := planOf(limiter, r)
		f.decide, f.count = p.Decide, p.CountDenial
	}
	f.direct = f.decide != nil && !hasSlot(r.Limits) && !cools(r.Limits)
	if kept {
		atomic.StorePointer(&r.fast, unsafe.Pointer(f))
	}
	return f
}

// covers reports whether f was made for limits, a rule's Limits.
func (f *ruleFast) covers(limits []Limit) bool {
	return len(f.limits) == len(limits) && &f.limits[0] == &limits[0]
}

// configOf returns the Config limiter reports (see [Abilities]); nil for
// none.
func configOf(limiter Limiter) *Config { return limiter.Abilities().Config }

// planOf returns limiter's plan for r: a zero Plan when it has none or
// the plan is not limiter's own (see [Plan]).
func planOf(limiter Limiter, r *Rule) Plan {
	res, err := limiter.Do(context.Background(), Op{Kind: OpPlan, Request: Request{Name: r.Name, Limits: r.Limits, Rule: r}})
	if err != nil || !res.Plan.Of(limiter) {
		return Plan{}
	}
	return res.Plan
}
