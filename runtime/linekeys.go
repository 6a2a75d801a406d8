package ratelimit

import (
	"context"
	"fmt"
	"slices"
)

// split returns the one key of a call of r with keys, or, when the call
// has a key per limit, those keys (lines, a copy of keys, so that keys
// stays on its caller's stack); see [Rule.Check] for which is which.
func (r *Rule) split(keys []string) (key string, lines []string, err error) {
	if key, ok := r.oneKey(keys); ok {
		return key, nil, nil
	}
	switch {
	case len(keys) == 0:
		return "", make([]string, len(r.Limits)), nil
	case len(keys) == len(r.Limits):
		return "", slices.Clone(keys), nil
	}
	return "", nil, fmt.Errorf("%w: %s: %d keys for %d limits", ErrInvalidLimit, r.Name, len(keys), len(r.Limits))
}

// oneKey returns the one key of a call of r with keys (no key is ""),
// and whether the call has one key rather than a key per limit. It is
// small enough to inline, so a call of one key pays no call of split.
func (r *Rule) oneKey(keys []string) (key string, ok bool) {
	if r.KeyExprs != nil || len(keys) > 1 {
		return "", false
	}
	if len(keys) == 1 {
		key = keys[0]
	}
	return key, true
}

// request returns the request of a call of r of cost, with one key or a
// key per limit (lines), its limits as the overrides make them, and the
// limit whose key's override exempts or blocks the call (-1: none).
func (r *Rule) request(ctx context.Context, limiter Limiter, key string, lines []string, cost int64) (Request, int) {
	req := Request{Name: r.Name, Key: key, Keys: lines, Cost: cost, Rule: r, Shared: r.Shared}
	line := -1
	if lines != nil {
		req.Limits, line = r.lineLimits(ctx, limiter, lines)
	} else {
		req.Limits = r.oneKeyLimits(ctx, limiter, key)
	}
	return req, line
}

// oneKeyLimits returns the limits of a call of r with one key on limiter.
func (r *Rule) oneKeyLimits(ctx context.Context, limiter Limiter, key string) []Limit {
	if c := configOf(limiter); c != nil && c.Overrides != nil {
		return effectiveLimits(ctx, c.Overrides, r, key)
	}
	return r.Limits
}

// keyed reports whether limit i of r takes its key's overrides.
func (r *Rule) keyed(i int) bool {
	return r.KeyExprs == nil || (i < len(r.KeyExprs) && r.KeyExprs[i] != "")
}

// lineLimits returns the limits a call of r with a key per limit is
// decided against (see Keys in the package doc) and, when a key's override
// exempts or blocks it, the limit of that key (else -1).
func (r *Rule) lineLimits(ctx context.Context, limiter Limiter, keys []string) ([]Limit, int) {
	c := configOf(limiter)
	if c == nil || c.Overrides == nil {
		return r.Limits, -1
	}
	limits, _, line := r.explainLines(ctx, c.Overrides, keys, false)
	return limits, line
}

// EffectiveLimits returns the limits the calls of r with the given keys
// (as for [Rule.Check]) are decided against on limiter: the overrides of
// limiter's [Config] (see [WithOverrides]) for the keys or the rule, else
// r.Limits. Keys of a number Check refuses get r.Limits.
func (r *Rule) EffectiveLimits(ctx context.Context, limiter Limiter, keys ...string) []Limit {
	key, lines, err := r.split(keys)
	switch {
	case err != nil:
		return r.Limits
	case lines != nil:
		limits, _ := r.lineLimits(ctx, limiter, lines)
		return limits
	}
	return r.oneKeyLimits(ctx, limiter, key)
}

// Explain returns what [Rule.EffectiveLimits] returns, and where each of
// those limits comes from: "key" (its key's own override), "tier:<tier>"
// (the override of its key's tier), "rule" (the rule's override) or
// "directive" (r.Limits), for an operator asking why a key is limited.
// When an override exempts or blocks the call, limits is that one
// [Unlimited] or [Block] limit and from names its source alone.
func (r *Rule) Explain(ctx context.Context, limiter Limiter, keys ...string) (limits []Limit, from []string) {
	key, lines, err := r.split(keys)
	c := configOf(limiter)
	if err != nil || c == nil || c.Overrides == nil {
		return r.Limits, r.fromEach(len(r.Limits), "directive")
	}
	if lines != nil {
		limits, from, _ = r.explainLines(ctx, c.Overrides, lines, true)
		return limits, from
	}
	limits, src := r.explainKey(ctx, c.Overrides, key)
	return limits, r.fromEach(len(limits), src)
}

// explainKey returns the limits of a call of r with one key against the
// overrides src, and where they come from (see [Rule.Explain]).
func (r *Rule) explainKey(ctx context.Context, src Overrides, key string) ([]Limit, string) {
	byRule, _ := src.Lookup(ctx, r.Name)
	if ks, ok := src.(KeyOverrides); ok {
		if ov, ok := ks.LookupKey(ctx, r.Name, key); ok && (len(byRule) == 0 || len(ov) == 0 || &ov[0] != &byRule[0]) {
			if l, ok := usable(ov, r); ok {
				if tier := ks.Tier(r.Name, key); tier != "" {
					return l, "tier:" + tier
				}
				return l, "key"
			}
		}
	}
	if l, ok := usable(byRule, r); ok {
		return l, "rule"
	}
	return r.Limits, "directive"
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
	var own [4][]Limit
	byKey, verdict, line := r.keyOverrides(ctx, src, keys, byRule, own[:0])
	if verdict != "" {
		return []Limit{{Algorithm: verdict}}, r.fromOf(src, keys, line, "key", explain), line
	}
	if verdictOf(byRule) != "" {
		if byKey == nil {
			return byRule, r.fromOf(src, keys, -1, "rule", explain), -1
		}
		byRule = nil // keys with their own overrides: the others keep the directive's
	}
	if byKey == nil && byRule == nil {
		if explain {
			return r.Limits, r.fromEach(len(r.Limits), "directive"), -1
		}
		return r.Limits, nil, -1
	}
	limits := make([]Limit, len(r.Limits))
	var from []string
	if explain {
		from = make([]string, len(r.Limits))
	}
	for i := range r.Limits {
		source := "directive"
		switch {
		case byKey != nil && i < len(byKey[i]):
			limits[i], source = byKey[i][i], "key"
		case i < len(byRule):
			limits[i], source = byRule[i], "rule"
		default:
			limits[i] = r.Limits[i]
		}
		if explain {
			from[i] = source
			if source == "key" {
				from[i] = r.fromOf(src, keys, i, "key", true)[0]
			}
		}
	}
	return limits, from, -1
}

// keyOverrides returns, appended to byKey, the usable override of the key
// of each keyed limit of r (nil for the others), or nil when no key has
// one; and when one of them exempts or blocks the call, that verdict
// (block before unlimited) and its limit's index. byRule is the rule's
// override, which src's LookupKey may return for a key without its own.
func (r *Rule) keyOverrides(ctx context.Context, src Overrides, keys []string, byRule []Limit, byKey [][]Limit) ([][]Limit, Algorithm, int) {
	ks, ok := src.(KeyOverrides)
	if !ok {
		return nil, "", -1
	}
	verdict, line, some := Algorithm(""), -1, false
	for i := range r.Limits {
		var ov []Limit
		if r.keyed(i) {
			if got, found := ks.LookupKey(ctx, r.Name, keys[i]); found && (len(got) == 0 || len(byRule) == 0 || &got[0] != &byRule[0]) {
				if l, fine := usable(got, r); fine {
					ov, some = l, true
				}
			}
		}
		byKey = append(byKey, ov)
		if v := verdictOf(ov); v != "" && verdict != Block {
			verdict, line = v, i
		}
	}
	if !some {
		return nil, "", -1
	}
	return byKey, verdict, line
}

// fromEach returns n sources, each src.
func (r *Rule) fromEach(n int, src string) []string {
	from := make([]string, n)
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
		if t, ok := src.(KeyOverrides); ok {
			if tier := t.Tier(r.Name, keys[line]); tier != "" {
				return []string{"tier:" + tier}
			}
		}
	}
	return []string{what}
}
