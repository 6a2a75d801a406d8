package ratelimit

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// KeyOverrides is an [Overrides] that also replaces the limits of single
// keys of a rule, each on its own or as a member of a tier (a named group
// of keys sharing limits). A call of rule r with key k is decided against
// the first of these that is usable (see [WithOverrides]):
//
//  1. k's limits from LookupKey: its own, or its tier's;
//  2. r's limits from Lookup;
//  3. r's own limits, from its directives.
//
// So a key's own limits win over its tier's, which win over the rule's
// override. The state is kept as for a rule's override: limit i of a
// key's override counts in the same place as limit i of the rule, so a key
// moved into a tier or back keeps the calls it has made.
// [StaticOverrides] and the overrides of package redislimit are
// KeyOverrides.
type KeyOverrides interface {
	Overrides
	// LookupKey returns the limits that replace those of the rule named
	// name for the calls of key, and whether there are any: the key's own
	// or its tier's, or when it has neither it may return the rule's, as
	// Lookup would, sparing Rule.Check a second lookup. key is the call's
	// key as [Rule.Check] got it, of any length.
	LookupKey(ctx context.Context, name, key string) ([]Limit, bool)
	// Tier returns the tier whose limits LookupKey returns for key of the
	// rule named name, or "" when they are the key's own or there are
	// none: [Rule.Explain] tells it to an operator.
	Tier(name, key string) string
}

// overrideTable is the table of a [StaticOverrides]: once in use it is
// never changed, and a change swaps in a new one.
type overrideTable struct {
	rules ruleTable
}

// ruleTable holds the overrides of each rule, by name. Once in use it is
// never changed: a source swaps in a new one.
type ruleTable map[string]*ruleOverrides

// ruleOverrides are the overrides of one rule.
type ruleOverrides struct {
	limits []Limit               // the rule's; nil when none
	tiers  map[string][]Limit    // each tier's, by tier
	own    map[string][]Limit    // each key's own, by table key (see tableKey)
	member map[string]membership // each key's tier, by table key
	// keys holds each key's limits, its own or its tier's, by bounded
	// key; nil when no key has any, so that the calls of a rule without
	// key overrides never look at their key.
	keys map[string][]Limit
	// digests holds the table key of each key named, by the key's
	// [KeyDigest]: the calls of a keyhash=true rule come by the digest of
	// the key an override names as itself.
	digests map[string]string
}

// membership puts a key in a tier.
type membership struct {
	tier  string
	field string // the hash field that says so; "" for StaticOverrides
}

// rule returns the overrides of the rule named name, or nil.
func (t *overrideTable) rule(name string) *ruleOverrides {
	if t == nil {
		return nil
	}
	return t.rules[name]
}

// lookup returns the limits of key (nil when it has none) and the rule's
// (nil when it has none) for the rule named name.
func (t *overrideTable) lookup(name, key string) (byKey, byRule []Limit) {
	e := t.rule(name)
	if e == nil {
		return nil, nil
	}
	return e.key(key), e.limits
}

// ruleLimits returns the rule's limits, or nil.
func (e *ruleOverrides) ruleLimits() []Limit {
	if e == nil {
		return nil
	}
	return e.limits
}

// key returns the limits of the calls of key, or nil. A key is looked up
// by its bounded key (see callkey.Bound), as the limiters keep it, which only
// costs a long key anything when the rule has key overrides.
func (e *ruleOverrides) key(key string) []Limit {
	if e == nil || e.keys == nil {
		return nil
	}
	if l := e.keys[callkey.Bound(key)]; l != nil {
		return l
	}
	if k, ok := e.digests[key]; ok {
		return e.keys[k] // a keyhash=true rule's key, named as itself
	}
	return nil
}

// named returns the table key of key (see callkey.Named), noting it by
// key's digest too.
func (e *ruleOverrides) named(key string) string {
	k := callkey.Named(key)
	if e.digests == nil {
		e.digests = map[string]string{}
	}
	e.digests[KeyDigest(key)] = k
	return k
}

// entry returns the overrides of the rule named name, adding them when
// there are none.
func (t ruleTable) entry(name string) *ruleOverrides {
	e := t[name]
	if e == nil {
		e = &ruleOverrides{}
		t[name] = e
	}
	return e
}

// setField sets what one field of [ParseOverrides] says, value
// being its value. The keys' limits are left for resolve.
func (t ruleTable) setField(field, value string) error {
	name, rest, ok := strings.Cut(field, "|")
	if key, isKey := strings.CutPrefix(rest, "key="); ok && isKey {
		return t.setKeyField(field, name, key, value)
	}
	if tier, isTier := strings.CutPrefix(rest, "tier="); ok && isTier {
		if err := checkTier(tier); err != nil {
			return err
		}
		l, err := parseOverride(value)
		if err != nil {
			return err
		}
		t.entry(name).setTier(tier, l)
		return nil
	}
	if ok {
		return unknownQualifier(rest)
	}
	l, err := parseOverride(value)
	if err != nil {
		return err
	}
	t.entry(field).limits = l
	return nil
}

// unknownQualifier returns the error of a field whose text after its '|',
// rest, is neither key=<key> nor tier=<tier>, suggesting the one it
// probably misspells. It quotes only the qualifier's leading letters:
// what follows may be a key.
func unknownQualifier(rest string) error {
	n := 0
	for n < len(rest) && ('a' <= rest[n] && rest[n] <= 'z' || 'A' <= rest[n] && rest[n] <= 'Z') {
		n++
	}
	word, hint := rest[:n], ""
	for _, q := range []string{"key", "tier"} {
		if w := strings.ToLower(word); w == q || editDistance(w, q) == 1 {
			hint = "; did you mean " + q + "=?"
			break
		}
	}
	return fmt.Errorf("%w: unknown qualifier %q after '|': want key=<key> or tier=<tier>%s", ErrInvalidLimit, word, hint)
}

// editDistance returns the optimal string alignment distance between a and
// b: the number of single-byte insertions, deletions, substitutions and
// transpositions of adjacent bytes that turn a into b.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// setKeyField sets what the field name|key=<key> says, value being its
// value: tier=<tier> or limits.
func (t ruleTable) setKeyField(field, name, key, value string) error {
	k := callkey.Named(key)
	if e := t[name]; e != nil && (e.own[k] != nil || e.member[k].tier != "") {
		return fmt.Errorf("%w: key %q is set by another field too (by its stand-in or as itself)", ErrInvalidLimit, k)
	}
	if tier, ok := strings.CutPrefix(strings.TrimSpace(value), "tier="); ok {
		if err := checkTier(tier); err != nil {
			return err
		}
		e := t.entry(name)
		e.setMember(e.named(key), membership{tier, field})
		return nil
	}
	l, err := parseOverride(value)
	if err != nil {
		return err
	}
	e := t.entry(name)
	e.setOwn(e.named(key), l)
	return nil
}

// maxTier bounds the length of a tier's name.
const maxTier = 64

// checkTier reports a tier name that is not 1 to 64 ASCII letters, digits,
// '_', '-' and '.'.
func checkTier(tier string) error {
	if tier == "" || len(tier) > maxTier {
		return fmt.Errorf("%w: tier %q: want 1 to %d letters, digits, '_', '-' or '.'", ErrInvalidLimit, tier, maxTier)
	}
	for _, c := range []byte(tier) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' {
			return fmt.Errorf("%w: tier %q: want 1 to %d letters, digits, '_', '-' or '.'", ErrInvalidLimit, tier, maxTier)
		}
	}
	return nil
}

// setTier sets the limits of tier, or removes them when limits is nil.
func (e *ruleOverrides) setTier(tier string, limits []Limit) {
	if limits == nil {
		delete(e.tiers, tier)
		return
	}
	if e.tiers == nil {
		e.tiers = map[string][]Limit{}
	}
	e.tiers[tier] = limits
}

// setOwn gives the key k its own limits instead of a tier's, or removes
// them when limits is nil.
func (e *ruleOverrides) setOwn(k string, limits []Limit) {
	delete(e.member, k)
	if limits == nil {
		delete(e.own, k)
		return
	}
	if e.own == nil {
		e.own = map[string][]Limit{}
	}
	e.own[k] = limits
}

// setMember puts the key k in a tier instead of giving it its own
// limits, or in no tier when m's tier is empty.
func (e *ruleOverrides) setMember(k string, m membership) {
	delete(e.own, k)
	if m.tier == "" {
		delete(e.member, k)
		return
	}
	if e.member == nil {
		e.member = map[string]membership{}
	}
	e.member[k] = m
}

// resolve sets the keys' limits of every rule from their own and their
// tiers', and returns an error naming the field of each key put in a tier
// that is not set.
func (t ruleTable) resolve() []error {
	var errs []error
	for _, e := range t {
		for _, m := range e.member {
			if e.tiers[m.tier] == nil {
				errs = append(errs, &FieldError{Field: m.field, Err: fmt.Errorf("%w: tier %q is not set", ErrInvalidLimit, m.tier)})
			}
		}
		e.resolve()
	}
	return errs
}

// resolve sets the keys' limits from their own and their tiers'. A key put
// in a tier that is not set has none (the rule's apply).
func (e *ruleOverrides) resolve() {
	e.keys = nil
	for k, l := range e.own {
		e.setKey(k, l)
	}
	for k, m := range e.member {
		if l := e.tiers[m.tier]; l != nil {
			e.setKey(k, l)
		}
	}
}

func (e *ruleOverrides) setKey(k string, limits []Limit) {
	if e.keys == nil {
		e.keys = map[string][]Limit{}
	}
	e.keys[k] = limits
}

// clone returns a copy of e that can be changed without changing e; an
// empty one when e is nil.
func (e *ruleOverrides) clone() *ruleOverrides {
	if e == nil {
		return &ruleOverrides{}
	}
	return &ruleOverrides{limits: e.limits, tiers: maps.Clone(e.tiers), own: maps.Clone(e.own), member: maps.Clone(e.member),
		digests: maps.Clone(e.digests)}
}

// empty reports whether e overrides nothing.
func (e *ruleOverrides) empty() bool {
	return e.limits == nil && len(e.tiers) == 0 && len(e.own) == 0 && len(e.member) == 0
}

// StaticOverrides are overrides set by the process itself, such as from
// its configuration or an admin endpoint: the limits of rules, of their
// keys and of their tiers, with the precedence of [KeyOverrides]. Keys are
// addressed as in [ParseOverrides]: by the key itself or by its
// stand-in. The zero value overrides nothing. It is safe for concurrent
// use; a change applies to the calls that start after it. Limits are not
// checked when set: unusable ones are ignored by [Rule.Check], as with any
// [Overrides].
type StaticOverrides struct {
	mu    sync.Mutex
	table atomic.Pointer[overrideTable]
}

// SetRule sets the limits of the rule named name; without limits it
// removes them.
func (s *StaticOverrides) SetRule(name string, limits ...Limit) {
	s.update(name, func(e *ruleOverrides) { e.limits = nonEmpty(limits) })
}

// SetKey sets the limits of the calls of key of the rule named name,
// instead of its tier's; without limits it removes them.
func (s *StaticOverrides) SetKey(name, key string, limits ...Limit) {
	s.update(name, func(e *ruleOverrides) { e.setOwn(e.named(key), nonEmpty(limits)) })
}

// SetTier sets the limits of the keys of the rule named name that are in
// tier; without limits it removes them (the keys keep their membership).
func (s *StaticOverrides) SetTier(name, tier string, limits ...Limit) {
	s.update(name, func(e *ruleOverrides) { e.setTier(tier, nonEmpty(limits)) })
}

// SetKeyTier puts key of the rule named name in tier, instead of giving
// it its own limits; an empty tier takes it out of any.
func (s *StaticOverrides) SetKeyTier(name, key, tier string) {
	s.update(name, func(e *ruleOverrides) { e.setMember(e.named(key), membership{tier: tier}) })
}

// update swaps in a table in which f has changed the overrides of name.
func (s *StaticOverrides) update(name string, f func(*ruleOverrides)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rules ruleTable
	if old := s.table.Load(); old != nil {
		rules = maps.Clone(old.rules)
	}
	if rules == nil {
		rules = ruleTable{}
	}
	e := rules[name].clone()
	f(e)
	e.resolve()
	if e.empty() {
		delete(rules, name)
	} else {
		rules[name] = e
	}
	s.table.Store(&overrideTable{rules: rules})
}

func nonEmpty(limits []Limit) []Limit {
	if len(limits) == 0 {
		return nil
	}
	return limits
}

// Lookup returns the limits set for the rule named name. See [Overrides].
func (s *StaticOverrides) Lookup(_ context.Context, name string) ([]Limit, bool) {
	l := s.table.Load().rule(name).ruleLimits()
	return l, l != nil
}

// LookupKey returns the limits set for key of the rule named name, its
// own or its tier's, else the rule's. See [KeyOverrides].
func (s *StaticOverrides) LookupKey(_ context.Context, name, key string) ([]Limit, bool) {
	byKey, byRule := s.table.Load().lookup(name, key)
	if byKey != nil {
		return byKey, true
	}
	return byRule, byRule != nil
}

// Tier returns the tier whose limits key of the rule named name has, or
// "" when it has its own or none.
func (s *StaticOverrides) Tier(name, key string) string {
	e := s.table.Load().rule(name)
	if e == nil {
		return ""
	}
	k := callkey.Named(key)
	if _, own := e.own[k]; own {
		return ""
	}
	if m, ok := e.member[k]; ok && e.tiers[m.tier] != nil {
		return m.tier
	}
	return ""
}

var _ KeyOverrides = (*StaticOverrides)(nil)
