package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func perMinute(n int64) Limit { return Limit{Period: time.Minute, Threshold: n} }

func TestStaticOverrides(t *testing.T) {
	ctx := context.Background()
	var s StaticOverrides
	_, ok := s.Lookup(ctx, "r")
	assert.False(t, ok, "the zero value overrides nothing")
	s.SetRule("r", perMinute(1))
	s.SetKey("r", "k", perMinute(2))
	s.SetTier("r", "gold", perMinute(3))
	s.SetKeyTier("r", "g", "gold")
	lookup := func(key string) int64 {
		l, ok := s.LookupKey(ctx, "r", key)
		if !ok {
			return 0
		}
		return l[0].Threshold
	}
	// A key without limits of its own or of its tier gets the rule's.
	assert.Equal(t, []int64{2, 3, 1}, []int64{lookup("k"), lookup("g"), lookup("x")})
	s.SetKeyTier("r", "k", "gold") // instead of its own
	s.SetKey("r", "g", perMinute(4))
	assert.Equal(t, []int64{3, 4}, []int64{lookup("k"), lookup("g")})
	s.SetTier("r", "gold") // k keeps its membership, without limits
	assert.Equal(t, int64(1), lookup("k"))
	s.SetTier("r", "gold", perMinute(5))
	assert.Equal(t, int64(5), lookup("k"))
	s.SetKey("r", "g")
	s.SetKeyTier("r", "k", "")
	s.SetTier("r", "gold")
	assert.Equal(t, []int64{1, 1}, []int64{lookup("k"), lookup("g")})
	got, ok := s.Lookup(ctx, "r")
	assert.True(t, ok && got[0].Threshold == 1)
	s.SetRule("r")
	_, ok = s.Lookup(ctx, "r")
	assert.False(t, ok)
	assert.Empty(t, s.table.Load().rules, "a rule without overrides leaves the table")
}

// TestParseOverridesRejectsUnknownQualifiers: a field whose text after
// '|' is neither key= nor tier= was the name of a rule that nothing
// calls; it is an error now, suggesting the qualifier it misspells, and
// sets nothing.
func TestParseOverridesRejectsUnknownQualifiers(t *testing.T) {
	for field, want := range map[string]string{
		"r|tire=gold": `unknown qualifier "tire" after '|': want key=<key> or tier=<tier>; did you mean tier=?`,
		"r|kye=abc":   `unknown qualifier "kye" after '|': want key=<key> or tier=<tier>; did you mean key=?`,
		"r|key:abc":   `unknown qualifier "key" after '|': want key=<key> or tier=<tier>; did you mean key=?`,
		"r|Key=abc":   `unknown qualifier "Key" after '|': want key=<key> or tier=<tier>; did you mean key=?`,
		"r|TIER=gold": `unknown qualifier "TIER" after '|': want key=<key> or tier=<tier>; did you mean tier=?`,
		"r|user=abc":  `unknown qualifier "user" after '|': want key=<key> or tier=<tier>`,
		"r|":          `unknown qualifier "" after '|': want key=<key> or tier=<tier>`,
	} {
		s, err := ParseOverrides(map[string]string{field: "period=1m threshold=5"})
		assert.ErrorIs(t, err, ErrInvalidLimit, field)
		assert.ErrorContains(t, err, want, field)
		var fe *FieldError
		if assert.ErrorAs(t, err, &fe) {
			assert.NotContains(t, fe.Err.Error(), "abc", "the reason does not quote a key")
		}
		assert.Empty(t, s.table.Load().rules, "%s sets nothing", field)
	}
}

// TestValidateOverride: what an override must be for a rule's calls to
// use it, which Rule.Check otherwise ignores silently.
func TestValidateOverride(t *testing.T) {
	plain := &Rule{Name: "p", Limits: []Limit{perMinute(5)}}
	lines := &Rule{Name: "l", Limits: []Limit{perMinute(100), perMinute(5)}, KeyExprs: []string{"", "tenant"}}
	gcra := Limit{Period: time.Minute, Threshold: 5, Algorithm: GCRA}
	for _, tt := range []struct {
		rule   *Rule
		limits []Limit
		forKey bool
		want   string // "" when it applies
	}{
		{plain, []Limit{perMinute(9)}, false, ""},
		{plain, []Limit{perMinute(9)}, true, ""},
		{plain, []Limit{perMinute(9), perMinute(99)}, true, ""}, // adds a limit
		{plain, []Limit{gcra}, false, "limit 1 is gcra, but limit 1 of rule p is sliding_log"},
		{plain, nil, false, "0 limits: want 1 to 16"},
		{plain, []Limit{{Period: time.Minute}}, false, "threshold"},
		{lines, []Limit{perMinute(100), perMinute(9)}, true, ""},
		{lines, []Limit{perMinute(9)}, false, ""}, // the rule's: limit 1 replaced
		{lines, []Limit{perMinute(9)}, true, "1 limits for rule l, whose 2 limits each have their own key"},
		{lines, []Limit{perMinute(1), perMinute(2), perMinute(3)}, true, "3 limits for rule l"},
		{lines, []Limit{{Algorithm: Unlimited}}, true, ""},
		{lines, []Limit{{Algorithm: Block}}, true, ""},
	} {
		err := tt.rule.ValidateOverride(tt.limits, tt.forKey)
		if tt.want == "" {
			assert.NoError(t, err, "%s %v", tt.rule.Name, tt.limits)
			_, ok := usable(tt.limits, tt.rule)
			assert.True(t, ok, "what applies is usable")
			continue
		}
		assert.ErrorIs(t, err, ErrInvalidLimit)
		assert.ErrorContains(t, err, tt.want)
	}
}

// TestParseOverride: a field's value of limits, as text or JSON.
func TestParseOverride(t *testing.T) {
	valid := map[string][]Limit{
		"period=30s threshold=5":    {{Period: 30 * time.Second, Threshold: 5}},
		"  threshold=5 period=30  ": {{Period: 30 * time.Second, Threshold: 5}},
		"period=1 threshold=10; period=1m threshold=100": {
			{Period: time.Second, Threshold: 10}, {Period: time.Minute, Threshold: 100}},
		"period=500ms threshold=2\nperiod=1h threshold=7\n": {
			{Period: 500 * time.Millisecond, Threshold: 2}, {Period: time.Hour, Threshold: 7}},
		"period=1s threshold=3 algorithm=sliding_log": {{Period: time.Second, Threshold: 3, Algorithm: SlidingLog}},
		`{"period": "30s", "threshold": 5}`:           {{Period: 30 * time.Second, Threshold: 5}},
		`[{"period": 1, "threshold": 10}, {"period": "1m", "threshold": 100}]`: {
			{Period: time.Second, Threshold: 10}, {Period: time.Minute, Threshold: 100}},
	}
	for in, want := range valid {
		got, err := parseOverride(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	invalid := map[string]string{
		"":                                   "no limits",
		"period=30s":                         "period and threshold are required",
		"period=30s threshold=0":             "threshold 0 is not positive",
		"period=3x threshold=1":              `period "3x"`,
		"period=1 threshold=1 threshold=2":   "threshold appears twice",
		"period=1 threshold=1 key=user":      `unknown name "key"`,
		"period=1 threshold":                 `"threshold": want name=value`,
		"period=1 threshold=1 algorithm=xyz": `unknown algorithm "xyz"`,
		`{"period": "1s"}`:                   "threshold 0 is not positive",
		`{"period": true, "threshold": 1}`:   "want whole seconds or a duration string",
		`{"period": "1s", "threshold": 1, "burst": 1, "extra": 1}`: "unknown field",
		`[{"period": "1s", "threshold": 1}`:                        "unexpected EOF",
		`[{"period": "1s", "threshold": 1}] x`:                     "text after the JSON value",
		`{"period": "1s", "threshold": 1}]`:                        "text after the JSON value",
		`{"period": "1s", "threshold": 1} {"period": "1s"}`:        "after array element",
	}
	for in, want := range invalid {
		_, err := parseOverride(in)
		if assert.ErrorIs(t, err, ErrInvalidLimit, in) {
			assert.Contains(t, err.Error(), want, in)
		}
	}
}

// TestAKeyOverrideNamesAKeyhashKeyAsItself is issue 35's finding that an
// override naming a keyhash=true rule's key as itself (a raw API key) was
// ignored: the rule's calls come by the key's digest. The override now
// applies to the calls of that digest, whether set by a field, by SetKey
// or by a tier, and the digest itself still names the key.
func TestAKeyOverrideNamesAKeyhashKeyAsItself(t *testing.T) {
	ctx := context.Background()
	rule := &Rule{Name: "items.list", Limits: []Limit{perMinute(100)}, KeyHash: []bool{true}}
	parsed, err := ParseOverrides(map[string]string{
		"items.list|key=key-raw-blocked":       "block",
		"items.list|key=key-raw-gold":          "tier=gold",
		"items.list|tier=gold":                 "period=1m threshold=2",
		"items.list|key=" + KeyDigest("by-dg"): "block",
	})
	assert.NoError(t, err)
	var set StaticOverrides
	set.SetKey("items.list", "key-raw-set", perMinute(3))
	for _, tc := range []struct {
		src  Overrides
		key  string
		want int // calls admitted of 5
	}{
		{parsed, "key-raw-blocked", 0},
		{parsed, "key-raw-gold", 2},
		{parsed, "by-dg", 0},
		{parsed, "key-other", 5},
		{&set, "key-raw-set", 3},
	} {
		l := NewMemory(WithOverrides(tc.src))
		admitted := 0
		for range 5 {
			if rule.Check(ctx, l, 1, KeyDigest(tc.key)) == nil {
				admitted++
			}
		}
		assert.Equal(t, tc.want, admitted, "key %s", tc.key)
	}
}
