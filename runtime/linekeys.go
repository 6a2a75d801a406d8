package ratelimit

import (
	"context"
	"strconv"
	"strings"
)

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
