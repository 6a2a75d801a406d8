package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// CheckKeys is [Rule.Check] for a rule whose limits each have their own
// key (see [Rule.KeyExprs]): keys[i] keys Limits[i], "" for a limit that
// counts every call as one, so len(keys) must be len(r.Limits) (else the
// error wraps [ErrInvalidLimit]). The call is all or nothing: when any
// limit denies it, none is charged, and the [*LimitError] names the
// denying limit (the one with the longest RetryAfter) and its key
// expression. Wait, Shadow, OnError and admissions are as for Check.
//
// Overrides apply per limit, positionally (an override's limit i replaces
// limit i, as for Check): limit i is decided against limit i of the
// override of its key (its own or its tier's) when the limit is keyed
// (KeyExprs[i] != "", or KeyExprs is nil) and that override is usable
// and has a limit i; else against limit i of the rule's override; else
// against Limits[i]. A limit that counts every call as one never takes a
// key's override. A key's override of unlimited or block applies to the
// whole call, as it does for Check: block on any limit's key denies the
// call, otherwise unlimited on one exempts it from every limit, global
// ones included. The rule's unlimited or block applies only when no key
// has an override of its own.
func (r *Rule) CheckKeys(ctx context.Context, limiter Limiter, keys []string, cost int64) error {
	if keys == nil {
		keys = []string{}
	}
	var o outcome
	err := r.check(ctx, limiter, "", keys, cost, &o)
	if err == nil {
		if rec, ok := ctx.Value(admissionKey{}).(*admissionRecord); ok {
			rec.add(r.admission(&o))
		}
	}
	return err
}

// AdmitKeys is [Rule.Admit] for a rule whose limits each have their own
// key; see [Rule.CheckKeys].
func (r *Rule) AdmitKeys(ctx context.Context, limiter Limiter, keys []string, cost int64) (Admission, error) {
	if keys == nil {
		keys = []string{}
	}
	var o outcome
	if err := r.check(ctx, limiter, "", keys, cost, &o); err != nil {
		return Admission{}, err
	}
	return r.admission(&o), nil
}

// ExplainKeys is [Rule.Explain] for a call with a key per limit (see
// [Rule.CheckKeys]): the limits it is decided against, one per limit of
// r, and where each comes from ("key", "tier:<tier>", "rule" or
// "directive"). When an override exempts or blocks the call, limits is
// that one [Unlimited] or [Block] limit and from names its source alone.
func (r *Rule) ExplainKeys(ctx context.Context, limiter Limiter, keys []string) (limits []Limit, from []string) {
	c := configOf(limiter)
	if c == nil || c.Overrides == nil || len(keys) != len(r.Limits) {
		from = make([]string, len(r.Limits))
		for i := range from {
			from[i] = "directive"
		}
		return r.Limits, from
	}
	limits, from, _ = r.explainLines(ctx, c.Overrides, keys, true)
	return limits, from
}

// keyed reports whether limit i of r takes its key's overrides.
func (r *Rule) keyed(i int) bool {
	return r.KeyExprs == nil || (i < len(r.KeyExprs) && r.KeyExprs[i] != "")
}

// lineLimits returns the limits a call of r with a key per limit is
// decided against (see [Rule.CheckKeys]) and, when a key's override
// exempts or blocks it, the limit of that key (else -1).
func (r *Rule) lineLimits(ctx context.Context, limiter Limiter, keys []string) ([]Limit, int) {
	c := configOf(limiter)
	if c == nil || c.Overrides == nil {
		return r.Limits, -1
	}
	limits, _, line := r.explainLines(ctx, c.Overrides, keys, false)
	return limits, line
}

// explainLines returns the limits of a call of r with keys against the
// overrides src, with their sources when explain is set, and the limit
// whose key's override exempts or blocks the call (else -1). It returns
// r.Limits itself when no override applies.
func (r *Rule) explainLines(ctx context.Context, src Overrides, keys []string, explain bool) ([]Limit, []string, int) {
	byRule, ok := src.Lookup(ctx, r.Name)
	if ok {
		byRule, ok = usable(byRule, r)
	}
	if !ok {
		byRule = nil
	}
	// The keys' own overrides, of the keyed limits.
	var own [4][]Limit
	byKey := own[:0]
	if len(r.Limits) > len(own) {
		byKey = make([][]Limit, 0, len(r.Limits))
	}
	ks, _ := src.(KeyOverrides)
	verdict, verdictLine, anyKey := Algorithm(""), -1, false
	for i := range r.Limits {
		var ov []Limit
		if ks != nil && r.keyed(i) {
			if got, found := ks.LookupKey(ctx, r.Name, keys[i]); found && (len(got) == 0 || len(byRule) == 0 || &got[0] != &byRule[0]) {
				if l, fine := usable(got, r); fine {
					ov, anyKey = l, true
				}
			}
		}
		byKey = append(byKey, ov)
		if v := verdictOf(ov); v != "" && verdict != Block {
			verdict, verdictLine = v, i
		}
	}
	if verdict != "" {
		return []Limit{{Algorithm: verdict}}, r.fromOf(src, keys, verdictLine, "key", explain), verdictLine
	}
	if v := verdictOf(byRule); v != "" {
		if !anyKey {
			return byRule, r.fromOf(src, keys, -1, "rule", explain), -1
		}
		byRule = nil // keys with their own overrides: the others keep the directive's
	}
	if !anyKey && byRule == nil {
		if explain {
			return r.Limits, r.fromEach("directive"), -1
		}
		return r.Limits, nil, -1
	}
	limits := make([]Limit, len(r.Limits))
	var from []string
	if explain {
		from = make([]string, len(r.Limits))
	}
	for i := range r.Limits {
		switch {
		case i < len(byKey[i]):
			limits[i] = byKey[i][i]
			if explain {
				from[i] = r.fromOf(src, keys, i, "key", true)[0]
			}
		case i < len(byRule):
			limits[i] = byRule[i]
			if explain {
				from[i] = "rule"
			}
		default:
			limits[i] = r.Limits[i]
			if explain {
				from[i] = "directive"
			}
		}
	}
	return limits, from, -1
}

// fromEach returns one source per limit of r, each src.
func (r *Rule) fromEach(src string) []string {
	from := make([]string, len(r.Limits))
	for i := range from {
		from[i] = src
	}
	return from
}

// fromOf returns, when explain is set, the one source of what overrides
// limit line: "key", or the key's tier as "tier:<tier>", for a key's
// override; what otherwise.
func (r *Rule) fromOf(src Overrides, keys []string, line int, what string, explain bool) []string {
	if !explain {
		return nil
	}
	if line >= 0 {
		if t, ok := src.(interface{ Tier(name, key string) string }); ok {
			if tier := t.Tier(r.Name, keys[line]); tier != "" {
				return []string{"tier:" + tier}
			}
		}
	}
	return []string{what}
}

// keysIdentity returns one string that tells the keys of a call with a key
// per limit apart from those of any other such call, for the calls that
// wait in one line (see lineKeyOf).
func keysIdentity(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}

// lineSet is the state of the limits of a call with a key per limit on a
// memory limiter: limit i's state is states[i], that of limit i of the
// pair (name, Keys[i]).
type lineSet struct {
	keys    [MaxLimits]string       // the bounded keys
	hashes  [MaxLimits]uint64       // their pairs' hashes
	entries [MaxLimits]*memoryEntry // their pairs' states
	shards  [MaxLimits]uint8        // the shards holding them, sorted, each once
	nShards int
}

// decideKeys is decide for a request with Keys: it locks the shards of
// every key at once, in the order of their index so that no two calls
// wait for each other, and decides all limits under them. With charge
// unset (Peek) it keeps no new state.
func (l *MemoryLimiter) decideKeys(ctx context.Context, req *Request, charge bool, d *Decision) error {
	if err := req.Validate(); err != nil {
		return err
	}
	var set lineSet
	n := len(req.Limits)
	for i, k := range req.Keys {
		if charge {
			set.keys[i] = callkey.Bound(k)
		} else {
			set.keys[i] = callkey.Named(k)
		}
		set.hashes[i] = l.hashOf(req.Name, set.keys[i], req.prep)
		set.addShard(uint8(set.hashes[i] % shardCount))
	}
	for _, s := range set.shards[:set.nShards] {
		l.shards[s].mu.Lock()
	}
	now := l.now()
	max := l.cfg.MaxKeys/shardCount + 1
	if charge {
		// Room first, for every pair that is new: making room later could
		// drop a pair this call already holds.
		for i := range n {
			shard := l.shardOf(set.hashes[i])
			if shard.find(req.Name, set.keys[i], set.hashes[i]) == nil {
				shard.makeRoom(now, max)
			}
		}
	}
	for i := range n {
		shard := l.shardOf(set.hashes[i])
		e := shard.find(req.Name, set.keys[i], set.hashes[i])
		switch {
		case e == nil && charge:
			e = &memoryEntry{name: req.Name, key: strings.Clone(set.keys[i]), next: shard.entries[set.hashes[i]]}
			shard.entries[set.hashes[i]] = e
		case e == nil:
			e = &memoryEntry{} // a new pair's state, not kept
		}
		if len(e.limits) < n {
			e.limits = append(e.limits, make([]limitState, n-len(e.limits))...)
		}
		set.entries[i] = e
	}
	plans := req.prep.plansOf(req.Limits)
	if plans == nil {
		plans = make([]memoryPlan, 0, n)
		for _, lim := range req.Limits {
			plans = append(plans, memoryPlanOf(lim))
		}
	}
	set.decide(plans, req.Units(), now, charge, d)
	for _, s := range set.shards[:set.nShards] {
		l.shards[s].mu.Unlock()
	}
	if charge && l.cfg.Hook != nil {
		seen := *req
		seen.Keys = append([]string(nil), set.keys[:n]...)
		l.report(ctx, seen, callkey.Bound(req.Key), *d)
	}
	return nil
}

// addShard adds shard s to the sorted set of the call's shards.
func (set *lineSet) addShard(s uint8) {
	i := 0
	for i < set.nShards && set.shards[i] < s {
		i++
	}
	if i < set.nShards && set.shards[i] == s {
		return
	}
	copy(set.shards[i+1:set.nShards+1], set.shards[i:set.nShards])
	set.shards[i] = s
	set.nShards++
}

// decide is memoryEntry.decidePlans with limit i's state that of
// set.entries[i].
func (set *lineSet) decide(plans []memoryPlan, cost, now int64, charge bool, d *Decision) {
	*d = Decision{Allowed: true}
	var delay time.Duration
	var r Decision
	for i := range plans {
		ok := set.entries[i].limits[i].check(&plans[i], now, cost, &r)
		switch {
		case !ok && (d.Allowed || r.RetryAfter > d.RetryAfter):
			*d = r
			d.Allowed, d.LimitIndex = false, i
		case ok && d.Allowed && (i == 0 || r.Remaining < d.Remaining):
			*d = r
			d.Allowed, d.LimitIndex = true, i
		}
		delay = max(delay, r.Delay)
	}
	if !d.Allowed {
		d.Delay = 0
		return
	}
	d.Delay = delay
	if charge {
		for i := range plans {
			e := set.entries[i]
			if exp := e.limits[i].charge(&plans[i], now, cost); exp > e.expiry {
				e.expiry = exp
			}
		}
	}
}
