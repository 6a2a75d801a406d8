package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// Overrides replaces the limits of rules at run time; see [WithOverrides].
// Implementations are safe for concurrent use and answer from memory: they
// are asked once per call.
type Overrides interface {
	// Lookup returns the limits that replace those of the rule named name,
	// and whether there are any.
	Lookup(ctx context.Context, name string) ([]Limit, bool)
}

// effectiveLimits returns the limits a call of rule r with the given key
// is decided against: the first usable of the key's override (its own or
// its tier's, when src is a [KeyOverrides]), the rule's override and the
// rule's own limits.
func effectiveLimits(ctx context.Context, src Overrides, r *Rule, key string) []Limit {
	if ks, ok := src.(KeyOverrides); ok {
		if ov, ok := ks.LookupKey(ctx, r.Name, key); ok {
			if l, ok := usable(ov, r); ok {
				return l
			}
		}
	}
	if ov, ok := src.Lookup(ctx, r.Name); ok {
		if l, ok := usable(ov, r); ok {
			return l
		}
	}
	return r.Limits
}

// usable returns the overriding limits ov as rule r's calls are decided
// against them, and whether they can be: there is at least one and at
// most [MaxLimits], each is valid, and limit i has the algorithm of the
// rule's limit i (whose state it reads), empty meaning the rule's. Limit
// i counts calls when the rule's limit i does ([Limit.PerCall]): an
// override changes a line's numbers, not what it counts.
func usable(ov []Limit, r *Rule) ([]Limit, bool) {
	if verdictOf(ov) != "" {
		return ov, true
	}
	if len(ov) == 0 || len(ov) > MaxLimits {
		return nil, false
	}
	fill := false
	for i, l := range ov {
		if l.validate() != nil {
			return nil, false
		}
		if i < len(r.Limits) {
			if l.PerCall != r.Limits[i].PerCall {
				fill = true
			}
			if l.Algorithm == "" && r.Limits[i].Algorithm != "" {
				fill = true // the rule's algorithm, which it may spell out
			} else if l.algorithm() != r.Limits[i].algorithm() {
				return nil, false
			}
		}
	}
	if fill {
		ov = append([]Limit(nil), ov...)
		for i := range ov {
			if i < len(r.Limits) && ov[i].Algorithm == "" {
				ov[i].Algorithm = r.Limits[i].Algorithm
			}
			if i < len(r.Limits) {
				ov[i].PerCall = r.Limits[i].PerCall
			}
		}
		for _, l := range ov {
			if l.validate() != nil {
				return nil, false
			}
		}
	}
	return ov, true
}

// ValidateOverride returns why limits, an override of r's limits, would
// be ignored by r's calls, or nil when they apply: an override applies
// when it has 1 to [MaxLimits] valid limits and its limit i has the
// algorithm of r's limit i (or none); and, for the override of a key or
// a tier (forKey) of a rule whose limits each have their own key
// ([Rule.KeyExprs]), when it has one limit per limit of r, since its limit
// i replaces limit i where the key keys it, and fewer would leave a line
// as it was. [Unlimited] and [Block] always apply. The error wraps
// [ErrInvalidLimit].
func (r *Rule) ValidateOverride(limits []Limit, forKey bool) error {
	if verdictOf(limits) != "" {
		return nil
	}
	if len(limits) == 0 || len(limits) > MaxLimits {
		return fmt.Errorf("%w: %d limits: want 1 to %d", ErrInvalidLimit, len(limits), MaxLimits)
	}
	for i, l := range limits {
		if err := l.validate(); err != nil {
			return fmt.Errorf("limit %d: %w", i+1, err)
		}
		if i < len(r.Limits) && l.Algorithm != "" && l.algorithm() != r.Limits[i].algorithm() {
			return fmt.Errorf("%w: limit %d is %s, but limit %d of rule %s is %s: an override keeps each limit's algorithm, whose state it reads",
				ErrInvalidLimit, i+1, l.algorithm(), i+1, r.Name, r.Limits[i].algorithm())
		}
	}
	if forKey && r.KeyExprs != nil && len(limits) != len(r.Limits) {
		return fmt.Errorf("%w: %d limits for rule %s, whose %d limits each have their own key: "+
			"a key's override replaces limit i with its limit i, so give it %d (one at a line without key= is not used, but holds its place)",
			ErrInvalidLimit, len(limits), r.Name, len(r.Limits), len(r.Limits))
	}
	if _, ok := usable(limits, r); !ok {
		return fmt.Errorf("%w: cannot replace the limits of rule %s", ErrInvalidLimit, r.Name)
	}
	return nil
}

// ParseOverrides returns the overrides that fields set, as a Redis hash
// of overrides holds them (see package redislimit): each maps a field
// naming a rule, a key of a rule or a tier of its keys to a value.
//
// A field's value is either directive-like text, one limit per line or
// ';'-separated, with the names of the //ratelimit: directive:
//
//	period=30s threshold=5
//	period=1 threshold=10; period=1m threshold=100
//	period=1s threshold=10 algorithm=token_bucket burst=20
//	period=month tz=Europe/Paris threshold=10000
//
// (period in whole seconds, as a Go duration or a calendar period: day,
// week, month or year, in the IANA zone tz, UTC without it; algorithm,
// burst, capacity and tz optional), or JSON, one object or an array of
// them:
//
//	{"period": "30s", "threshold": 5}
//	[{"period": 1, "threshold": 10}, {"period": "1m", "threshold": 100}]
//	{"period": "month", "tz": "Europe/Paris", "threshold": 10000}
//
// or one of two words: unlimited, which exempts the calls it applies to
// from every limit of their rule, and block, which denies them all (see
// [Unlimited] and [Block]).
//
// An operator sets one with redis-cli:
//
//	HSET ratelimit:overrides example.com/svc.Store.Get "period=30s threshold=5"
//
// and deletes the field to return to the generated limits.
//
// A field name holding '|' is read up to its first '|' as the rule's
// name (no name that ratelimitgen generates holds one; a rule of your own
// whose name does cannot be overridden by a field), and then:
//
//   - name|key=<key>: the limits of the calls of that key, or tier=<tier>
//     to put the key in that tier. <key> is the rest of the field, any
//     bytes, as [LimitError].Key shows it: the key itself, or the stand-in
//     that replaces a key whose escaped form is longer than 64 bytes (see
//     the package doc), which addresses the same calls as the key itself;
//   - name|tier=<tier>: the limits of the keys put in the tier, where
//     <tier> is 1 to 64 ASCII letters, digits, '_', '-' and '.';
//   - anything else is a mistake (a typo such as name|tire=gold,
//     name|Key=abc or name|key:abc): the field sets nothing, and the error
//     names its qualifier and the one it probably misspells.
//
// For example, after
//
//	HSET ratelimit:overrides example.com/svc.Store.Get "period=1m threshold=100"
//	HSET ratelimit:overrides "example.com/svc.Store.Get|tier=gold" "period=1m threshold=1000"
//	HSET ratelimit:overrides "example.com/svc.Store.Get|key=acme" tier=gold
//	HSET ratelimit:overrides "example.com/svc.Store.Get|key=initech" "period=1m threshold=10"
//
// acme may make 1000 calls a minute, initech 10 and every other key 100;
// see [KeyOverrides] for the precedence. A value that does not parse, a
// field with an unknown qualifier, a field that names no valid tier and a
// key put in a tier that the hash
// does not set are skipped (the rule, the tier or the key keeps the
// limits it would have without them) and reported in the error, which
// joins one [*FieldError] per field.
func ParseOverrides(fields map[string]string) (*StaticOverrides, error) {
	rules := make(ruleTable, len(fields))
	var errs []error
	// In order, so that of two fields of one key (by itself and by its
	// stand-in) the same one is skipped every time.
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		if err := rules.setField(field, fields[field]); err != nil {
			errs = append(errs, &FieldError{Field: field, Err: err})
		}
	}
	errs = append(errs, rules.resolve()...)
	s := new(StaticOverrides)
	s.table.Store(&overrideTable{rules: rules})
	return s, errors.Join(errs...)
}

// parseOverride parses the value of one field that sets limits: directive-
// like text or JSON, as described at [ParseOverrides]. Every limit it returns
// is valid; every error wraps [ErrInvalidLimit].
func parseOverride(value string) ([]Limit, error) {
	value = strings.TrimSpace(value)
	if value == string(Unlimited) || value == string(Block) {
		return []Limit{{Algorithm: Algorithm(value)}}, nil
	}
	var limits []Limit
	var err error
	if strings.HasPrefix(value, "{") || strings.HasPrefix(value, "[") {
		limits, err = parseOverrideJSON(value)
	} else {
		limits, err = parseOverrideText(value)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	if len(limits) == 0 {
		return nil, fmt.Errorf("%w: no limits", ErrInvalidLimit)
	}
	for i, l := range limits {
		if err := l.validate(); err != nil {
			return nil, fmt.Errorf("limit %d: %w", i+1, err)
		}
	}
	return limits, nil
}

func parseOverrideText(value string) ([]Limit, error) {
	var limits []Limit
	for _, line := range strings.FieldsFunc(value, func(r rune) bool { return r == ';' || r == '\n' }) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var l Limit
		seen := map[string]bool{}
		for _, f := range fields {
			name, v, ok := strings.Cut(f, "=")
			if !ok || v == "" {
				return nil, fmt.Errorf("%q: want name=value", f)
			}
			if seen[name] {
				return nil, fmt.Errorf("%s appears twice in one limit", name)
			}
			seen[name] = true
			var err error
			switch name {
			case "period":
				l.Period, l.Calendar, err = parsePeriod(v)
			case "tz":
				l.TZ = v
			case "threshold":
				l.Threshold, err = strconv.ParseInt(v, 10, 64)
			case "algorithm":
				l.Algorithm = Algorithm(v)
			case "burst":
				l.Burst, err = strconv.ParseInt(v, 10, 64)
			case "capacity":
				l.Capacity, err = strconv.ParseInt(v, 10, 64)
			default:
				return nil, fmt.Errorf("unknown name %q (want period, threshold, algorithm, burst, capacity or tz)", name)
			}
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", name, v, err)
			}
		}
		if !seen["period"] || !seen["threshold"] {
			return nil, fmt.Errorf("%q: period and threshold are required", strings.TrimSpace(line))
		}
		limits = append(limits, l)
	}
	return limits, nil
}

// jsonLimit is the JSON form of one overriding limit.
type jsonLimit struct {
	Period    json.RawMessage `json:"period"`
	Threshold int64           `json:"threshold"`
	Algorithm Algorithm       `json:"algorithm"`
	Burst     int64           `json:"burst"`
	Capacity  int64           `json:"capacity"`
	TZ        string          `json:"tz"`
}

// parsePeriod parses a period as overrides write it: a duration (see
// limitfacts.ParseDuration) or a calendar period.
func parsePeriod(s string) (time.Duration, string, error) {
	if limitfacts.IsCalendar(s) {
		return 0, s, nil
	}
	d, err := limitfacts.ParseDuration(s)
	return d, "", err
}

func parseOverrideJSON(value string) ([]Limit, error) {
	var list []jsonLimit
	if strings.HasPrefix(value, "{") {
		value = "[" + value + "]"
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON value")
	}
	limits := make([]Limit, len(list))
	for i, j := range list {
		var p time.Duration
		var cal, s string
		var n int64
		switch {
		case json.Unmarshal(j.Period, &s) == nil:
			d, c, err := parsePeriod(s)
			if err != nil {
				return nil, fmt.Errorf("limit %d: period %q: %w", i+1, s, err)
			}
			p, cal = d, c
		case json.Unmarshal(j.Period, &n) == nil:
			d, err := limitfacts.ParseDuration(strconv.FormatInt(n, 10))
			if err != nil {
				return nil, fmt.Errorf("limit %d: period %d: %w", i+1, n, err)
			}
			p = d
		default:
			return nil, fmt.Errorf("limit %d: period: want whole seconds or a duration string", i+1)
		}
		limits[i] = Limit{Period: p, Calendar: cal, TZ: j.TZ, Threshold: j.Threshold, Algorithm: j.Algorithm, Burst: j.Burst, Capacity: j.Capacity}
	}
	return limits, nil
}

// verdictOf returns Unlimited or Block when limits is an override that
// exempts or blocks calls, else "".
func verdictOf(limits []Limit) Algorithm {
	if len(limits) == 1 && (limits[0].Algorithm == Unlimited || limits[0].Algorithm == Block) {
		return limits[0].Algorithm
	}
	return ""
}
