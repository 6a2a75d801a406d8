package ratelimit

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// FuzzOverrideField checks the fields of an overrides hash: one field,
// whatever its name and value, is skipped with an error wrapping
// ErrInvalidLimit or sets exactly what its name says, for exactly the rule
// and the key it names: a call of rule name with key key finds a key's
// limits only from the field name|key=<key> (or =<key's stand-in>) and the
// rule's only from the field name. mode builds the field from name and
// key: 0 takes field as it is, 1 name|key=<key>, 2 name|key=<bounded key>,
// 3 name, 4 name|tier=<key>. A field whose text after its first '|' is
// neither key= nor tier= sets nothing.
func FuzzOverrideField(f *testing.F) {
	for _, seed := range []struct {
		mode                    uint8
		field, value, name, key string
	}{
		{0, "svc.Get", "period=1m threshold=5", "svc.Get", ""},
		{1, "", "period=1m threshold=5", "svc.Get", "acme"},
		{1, "", "tier=gold", "svc.Get", "acme"},
		{1, "", "period=1m threshold=5", "svc.Get", "a|key=b"},
		{1, "", "period=1m threshold=5", "svc", "x\x00y{}:%"},
		{2, "", "period=1 threshold=1; period=1h threshold=9", "svc", strings.Repeat("long key ", 10)},
		{1, "", "period=1m threshold=5", "svc", callkey.Bound(strings.Repeat("long key ", 10))},
		{3, "", `{"period": "1s", "threshold": 2}`, "a|b", ""},
		{4, "", "period=1m threshold=5", "svc", "gold"},
		{4, "", "period=1m threshold=5", "svc", "gold silver"},
		{0, "svc|key=", "tier=", "svc", ""},
		{0, "svc|tier=gold|key=a", "period=1m threshold=5", "svc", "a"},
		{0, "|key=a", "period=1m", "", "a"},
		{0, "svc|tire=gold", "period=1m threshold=5", "svc", ""},
		{0, "svc|Key=a", "period=1m threshold=5", "svc", "a"},
		{0, "svc|key:a", "period=1m threshold=5", "svc", "a"},
		{1, "", "period=month tz=Europe/Paris threshold=10000", "svc.Get", "acme"},
		{3, "", `{"period": "day", "tz": "Asia/Tokyo", "threshold": 2}`, "svc", ""},
	} {
		f.Add(seed.mode, seed.field, seed.value, seed.name, seed.key)
	}
	f.Fuzz(func(t *testing.T, mode uint8, field, value, name, key string) {
		switch mode % 5 {
		case 1:
			field = name + "|key=" + key
		case 2:
			field = name + "|key=" + callkey.Bound(key)
		case 3:
			field = name
		case 4:
			field = name + "|tier=" + key
		}
		rules := ruleTable{}
		err := rules.setField(field, value)
		if err != nil {
			if !errors.Is(err, ErrInvalidLimit) || len(rules) != 0 {
				t.Fatalf("field %q = %q: %v, with %d rules set: want an error wrapping ErrInvalidLimit and none", field, value, err, len(rules))
			}
			return
		}
		for _, err := range rules.resolve() {
			if !errors.Is(err, ErrInvalidLimit) {
				t.Fatalf("field %q = %q: %v does not wrap ErrInvalidLimit", field, value, err)
			}
		}
		byKey, byRule := (&overrideTable{rules: rules}).lookup(name, key)
		want, perr := parseOverride(value)
		ruleField, keyField := fieldOf(field, name, key)
		if byRule != nil && (!ruleField || !reflect.DeepEqual(byRule, want)) {
			t.Fatalf("field %q = %q gave rule %q the limits %v", field, value, name, byRule)
		}
		if byKey != nil && (!keyField || !reflect.DeepEqual(byKey, want)) {
			t.Fatalf("field %q = %q gave key %q of rule %q the limits %v", field, value, key, name, byKey)
		}
		if perr == nil && ruleField && byRule == nil {
			t.Fatalf("field %q = %q did not reach rule %q", field, value, name)
		}
		if perr == nil && keyField && byKey == nil {
			t.Fatalf("field %q = %q did not reach key %q of rule %q", field, value, key, name)
		}
	})
}

// fieldOf reports whether field names the rule name and whether it names
// key of that rule.
func fieldOf(field, name, key string) (ruleField, keyField bool) {
	if field == name {
		return !strings.Contains(field, "|"), false // a '|' must qualify a key or a tier
	}
	if strings.Contains(name, "|") {
		return false, false
	}
	k, ok := strings.CutPrefix(field, name+"|key=")
	if !ok {
		return false, false
	}
	return false, (k == key && !callkey.IsStandIn(key)) || (callkey.IsStandIn(k) && k == callkey.Bound(key))
}
