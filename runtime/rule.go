package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"
)

// Rule is the compiled form of the //ratelimit: directives of one method.
// Generated code keeps one per limited method in a package variable,
// calls [Rule.Check] before delegating, and returns [Rule.Clone]s of them
// from the package's RateLimitRules function. A Rule must not be changed
// once it is in use: Check validates its limits on its first call only.
type Rule struct {
	// Name is the limit identity; see [Request.Name].
	Name string
	// Limits must all admit a call.
	Limits []Limit
	// KeyExprs, when not nil, gives each of Limits its own key:
	// KeyExprs[i] is the key expression of Limits[i] as its directive
	// wrote it, such as "user" or "req.Tenant", or "" for a limit that
	// counts every call of the rule as one. [Rule.Check] takes a key per
	// limit for such a rule. Nil means every limit is keyed by the one key
	// given to Check.
	KeyExprs []string
	// KeyHash, when not nil, says which limits are keyed by the digest of
	// the caller's key (ratelimit.KeyDigest, the directive's keyhash=true):
	// KeyHash[i] for Limits[i]. Logs and the admin view then show such a
	// key as the caller's key's redacted form (see [Request.RedactedKey]).
	KeyHash []bool
	// Shared, when not nil, names the shared lines among Limits: Shared[i],
	// when not empty, is the name of the line Limits[i] is, declared once
	// for a type or a group of methods and added to the limits of each of
	// their rules. The line's state belongs to that name (and Limits[i]'s
	// key and index), not to the rule's: every rule with the line shares
	// it, and a call is decided against its rule's own limits and the
	// shared lines all or nothing. A rule with Shared has KeyExprs and is
	// checked with a key per limit, on a limiter that shares lines ([Abilities]).
	Shared []string
	// Wait is how long a denied call may wait to be admitted before
	// Check gives up; zero means no waiting. See [Rule.Check].
	Wait time.Duration
	// OnError says what Check does when the limiter fails; the zero value
	// means the limiter's default.
	OnError ErrorPolicy
	// Shadow makes Check report would-be denials to the limiter's hook
	// without ever denying a call.
	Shadow bool
	// OnlyFailures makes the rule count only the calls that fail:
	// [Rule.Reserve] admits a call while the failures so far leave room
	// for it, charging nothing, so calls in flight never deny each other;
	// [Reservation.Settle] charges a failure, [Reservation.Refund] nothing.
	// See [Rule.Reserve].
	OnlyFailures bool

	// prep holds the *rulePrep of Limits, once a call has validated them.
	prep atomic.Value
	// fast is the *ruleFast of the limiter last used (atomic).
	fast unsafe.Pointer
}

// Check asks limiter whether a call of the given cost (0 means 1) and
// keys may proceed, against r's limits or their overrides on limiter. No
// key means one key, "", for every limit; one key keys every limit of a
// rule without KeyExprs; a rule with several limits takes a key per limit
// (keys[i] keys Limits[i], "" for a limit that counts every call as one),
// and any other number of keys fails with an error wrapping
// [ErrInvalidLimit]. A call with a key per limit is all or nothing; see
// Keys in the package doc for how overrides apply to it.
//
// Check returns nil when the call was admitted, a [*LimitError] when it
// was denied (naming the denying limit, and its key expression), and
// otherwise an error saying why no decision could be made; r's Wait,
// Shadow and OnError apply as the package doc describes (Waiting,
// Failures). An admitted call whose ctx comes from [WithAdmission]
// records its [Admission] there.
func (r *Rule) Check(ctx context.Context, limiter Limiter, cost int64, keys ...string) error {
	if f, key := r.direct(limiter, keys, cost); f != nil {
		d, err := f.decide(ctx, key, cost)
		if err == nil && d.Allowed && d.Delay <= 0 && !admissionsWanted.Load() {
			return nil // the common call, whole
		}
		o := outcome{d: d, limits: r.Limits}
		return r.record(ctx, r.concludeDirect(ctx, limiter, key, cost, err, &o), &o)
	}
	var o outcome
	return r.record(ctx, r.checkSlow(ctx, limiter, keys, cost, &o), &o)
}

// record records the admission o tells of in ctx's record, if ctx has
// one (see [WithAdmission]) and Check's err is nil, and returns err.
func (r *Rule) record(ctx context.Context, err error, o *outcome) error {
	if err == nil && admissionsWanted.Load() {
		if rec, ok := ctx.Value(admissionKey{}).(*admissionRecord); ok {
			rec.add(r.admission(o))
		}
	}
	return err
}

// Admit is [Rule.Check] for adapters that describe an admitted call to
// their clients, such as with httplimit.SetHeaders: it returns the same error,
// and for an admitted call (a nil error) the decision that admitted it.
// It records nothing in a context from [WithAdmission]: its caller has
// the admission.
func (r *Rule) Admit(ctx context.Context, limiter Limiter, cost int64, keys ...string) (Admission, error) {
	var o outcome
	if err := r.check(ctx, limiter, keys, cost, &o); err != nil {
		return Admission{}, err
	}
	return r.admission(&o), nil
}

// admission describes the call that check admitted, as o tells it.
func (r *Rule) admission(o *outcome) Admission {
	if !o.decided || !o.d.Allowed || r.Shadow || o.d.LimitIndex < 0 || o.d.LimitIndex >= len(o.limits) {
		return Admission{}
	}
	a := Admission{Decided: true, Name: r.Name, Decision: o.d, Limit: o.limits[o.d.LimitIndex]}
	if o.perLimit && len(r.KeyExprs) == len(o.limits) {
		a.Limits, a.KeyExprs = o.limits, r.KeyExprs
	}
	return a
}

// Clone returns a copy of r, with a copy of its Limits, that is not yet in
// use: changing it changes nothing about r. Generated RateLimitRules
// functions return clones of the package's rules.
func (r *Rule) Clone() *Rule {
	if r == nil {
		return nil
	}
	return &Rule{Name: r.Name, Limits: slices.Clone(r.Limits), KeyExprs: slices.Clone(r.KeyExprs), Shared: slices.Clone(r.Shared), KeyHash: slices.Clone(r.KeyHash), Wait: r.Wait, OnError: r.OnError, Shadow: r.Shadow, OnlyFailures: r.OnlyFailures}
}

// check is [Rule.Check], also telling in o what it learnt of the call.
// given are Check's keys.
func (r *Rule) check(ctx context.Context, limiter Limiter, given []string, cost int64, o *outcome) error {
	f, key := r.direct(limiter, given, cost)
	if f == nil {
		return r.checkSlow(ctx, limiter, given, cost, o)
	}
	var err error
	o.d, err = f.decide(ctx, key, cost)
	o.limits = r.Limits
	return r.concludeDirect(ctx, limiter, key, cost, err, o)
}

// direct returns the function that decides a call of r with keys and cost
// on limiter (see [Plan]), and the call's one key, when check has
// nothing to do before asking it: a call of one key, of a rule without
// Wait, Shadow or shared lines, whose limits hold no concurrency limit and
// no cooldown, on a limiter without overrides that could replace them.
// Else it returns nil.
func (r *Rule) direct(limiter Limiter, keys []string, cost int64) (*ruleFast, string) {
	key, ok := r.oneKey(keys)
	if !ok || r.Shared != nil || cost < 0 || r.Wait > 0 || r.Shadow {
		return nil, ""
	}
	f := (*ruleFast)(atomic.LoadPointer(&r.fast)) // fastDecide, inlined by hand
	if f == nil || f.limiter != wordsOf(limiter) || !f.covers(r.Limits) {
		if f = r.makeFast(limiter); f == nil {
			return nil, ""
		}
	}
	if !f.direct || f.config != nil && f.config.Overrides != nil {
		return nil, ""
	}
	return f, key
}

// concludeDirect is conclude of a call of key that direct's function
// decided as o.d tells, or failed to decide with err.
func (r *Rule) concludeDirect(ctx context.Context, limiter Limiter, key string, cost int64, err error, o *outcome) error {
	if err == nil && o.d.Allowed {
		o.decided = true
		return r.pace(ctx, o.d.Delay)
	}
	req := Request{Name: r.Name, Key: key, Cost: cost, Rule: r, Limits: r.Limits}
	return r.conclude(ctx, limiter, &req, time.Time{}, err, o)
}

// checkSlow is check of any call: keys are the call's key per limit, or
// nil for a call of one key.
func (r *Rule) checkSlow(ctx context.Context, limiter Limiter, given []string, cost int64, o *outcome) error {
	key, keys, err := r.split(given)
	if err == nil {
		err = r.checkable(limiter, keys, cost)
	}
	if err != nil {
		o.limits = r.Limits
		return err
	}
	req, line := r.request(ctx, limiter, key, keys, cost)
	o.limits, o.perLimit = req.Limits, keys != nil
	if r.Shadow {
		ctx = withShadow(ctx)
	}
	if len(req.Limits) == 1 && len(r.Limits) > 0 && &req.Limits[0] != &r.Limits[0] {
		if v := verdictOf(req.Limits); v != "" { // an override exempts or blocks the call
			return r.verdict(ctx, limiter, &req, v, line)
		}
	}
	var start time.Time
	var queues bool
	if r.Wait > 0 && !r.Shadow {
		start, queues = time.Now(), can(limiter, OpTurn)
		if !queues {
			if joined, err := r.joinWaiting(ctx, limiter, &req, start, o); joined {
				return err
			}
		}
	}
	if cools(r.Limits) { // inlined: a rule without a cooldown line pays no call
		if cooled, err := r.cooledCheck(ctx, limiter, &req, start, o); cooled {
			return err
		}
	}
	if queues {
		done, err := r.checkInTurn(ctx, limiter, &req, start, o)
		if done {
			return err
		}
		return r.conclude(ctx, limiter, &req, start, err, o)
	}
	// A call of one key against the rule's own limits: the limiter's
	// plan, if it has one.
	var f *ruleFast
	if keys == nil && len(req.Limits) == len(r.Limits) && len(r.Limits) > 0 && &req.Limits[0] == &r.Limits[0] {
		f = r.fastDecide(limiter)
	}
	if f != nil && f.decide != nil {
		o.d, err = f.decide(ctx, key, cost)
	} else {
		o.d, err = limiter.Allow(ctx, req)
	}
	return r.conclude(ctx, limiter, &req, start, err, o)
}

// checkable returns why Check refuses a call of r with keys (as split
// returns them) and cost, or nil: a negative cost, a concurrency limit
// (which [Rule.Reserve] checks), or shared lines the call cannot be
// decided with (see canShare).
func (r *Rule) checkable(limiter Limiter, keys []string, cost int64) error {
	if cost < 0 {
		ce := &CostError{Name: r.Name, Cost: cost}
		if len(r.Limits) > 0 {
			ce.Limit = r.Limits[0]
		}
		return ce
	}
	if hasSlot(r.Limits) && r.prepared() == nil {
		// Not even when an override replaces the limits: the slot is not
		// an override's to lift.
		return fmt.Errorf("%w: %s: a rule with a concurrency limit is checked by Rule.Reserve", ErrInvalidLimit, r.Name)
	}
	return r.canShare(limiter, keys)
}

// canShare returns nil unless r has shared lines and the call cannot be
// decided with them: keys is nil (one key for every limit), or limiter
// does not share lines ([Abilities]). The error wraps [ErrInvalidLimit].
func (r *Rule) canShare(limiter Limiter, keys []string) error {
	if r.Shared == nil {
		return nil
	}
	if keys == nil || len(r.Shared) != len(r.Limits) {
		return fmt.Errorf("%w: %s: a rule with shared lines takes a key per limit, and a shared name per limit", ErrInvalidLimit, r.Name)
	}
	if !limiter.Abilities().SharesLines {
		return fmt.Errorf("%w: %s: limiter %T cannot share lines between rules (its Abilities say no SharesLines)", ErrInvalidLimit, r.Name, limiter)
	}
	return nil
}

// cooledCheck is check's answer to a call of req while a line of r cools
// (cooled): denied, admitted by a shadow rule, or waiting for the
// cooldown's end when r's wait reaches it.
func (r *Rule) cooledCheck(ctx context.Context, limiter Limiter, req *Request, start time.Time, o *outcome) (cooled bool, err error) {
	d, ok := r.coolingOf(ctx, limiter, req)
	if !ok {
		return false, nil
	}
	o.d, o.decided = d, true
	switch {
	case r.Shadow:
		return true, nil
	case r.Wait > 0 && d.RetryAfter <= time.Until(r.deadline(ctx, start)):
		return true, r.waitDenied(ctx, limiter, req, start, o)
	}
	return true, r.denied(limiter, r.limitError(req, d), d.LimitIndex)
}

// conclude ends check of the call req, which limiter decided as o.d
// tells, or failed to decide with err: a failure goes to the fallback and
// r's OnError, a denial to r's Shadow or Wait, and an admitted call is
// paced. start is when a call of a rule with Wait began.
func (r *Rule) conclude(ctx context.Context, limiter Limiter, req *Request, start time.Time, err error, o *outcome) error {
	fellBack := false
	if err != nil {
		var enforced []Limit
		if o.d, enforced, err = r.fallback(ctx, limiter, *req, err); err == nil {
			o.limits, fellBack = enforced, true
		}
	}
	if err != nil {
		return r.failure(ctx, limiter, err)
	}
	o.decided = true
	d := &o.d
	switch {
	case d.Allowed:
		return r.pace(ctx, d.Delay)
	case r.Shadow:
		return nil
	case r.Wait <= 0 || d.RetryAfter > time.Until(r.deadline(ctx, start)):
		decided := req
		if fellBack { // the fallback's decision describes the limits it enforced
			enforced := *req
			enforced.Limits = o.limits
			decided = &enforced
		}
		return r.denied(limiter, r.limitError(decided, *d), d.LimitIndex)
	}
	return r.waitDenied(ctx, limiter, req, start, o)
}
