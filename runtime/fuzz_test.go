package ratelimit

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseOverride checks the override grammar, text an operator writes
// into a Redis hash: ParseOverride never panics; its errors wrap
// ErrInvalidLimit; what it accepts is at least one valid limit, and JSON
// only when the whole value is JSON; and the limits it returns read back
// the same when written in either form.
func FuzzParseOverride(f *testing.F) {
	for _, seed := range []string{
		"period=30s threshold=5",
		"period=1 threshold=10; period=1m threshold=100",
		"period=500ms threshold=2\nperiod=1h threshold=7\n",
		"period=1s threshold=10 algorithm=token_bucket burst=20",
		"period=2s threshold=3 algorithm=leaky_bucket capacity=9",
		"period=3ms threshold=67108863 algorithm=sliding_window",
		"period=1.5µs threshold=1125899906842623 algorithm=gcra",
		"period=9223372036 threshold=1",
		"period=-1 threshold=1",
		"period=1 threshold=1 threshold=2",
		"period=1 threshold",
		`{"period": "30s", "threshold": 5}`,
		`[{"period": 1, "threshold": 10}, {"period": "1m", "threshold": 100, "algorithm": "gcra", "burst": 3}]`,
		`{"period": 1e3, "threshold": 1}`,
		`{"period": null, "threshold": 1}`,
		`[{"period": "1s", "threshold": 1}`,
		`[{"period": "1s", "threshold": 1}] x`,
		`[]`,
		"",
		"unlimited",
		" block\n",
		"unlimited; period=1 threshold=1",
		"period=1 threshold=1 algorithm=block",
		`{"period": 1, "threshold": 1, "algorithm": "unlimited"}`,
		"period=month tz=Europe/Paris threshold=10000",
		"period=day threshold=5 algorithm=fixed_window; period=1s threshold=1",
		"period=week tz=America/New_York threshold=1 algorithm=token_bucket",
		"period=year tz=Mars/Olympus threshold=1",
		"period=1h tz=UTC threshold=1",
		"period=month tz=Local threshold=1",
		`{"period": "month", "tz": "Asia/Tokyo", "threshold": 3}`,
		`{"period": "day", "tz": "../../etc/passwd", "threshold": 3}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		limits, err := parseOverride(value)
		if err != nil {
			if !errors.Is(err, ErrInvalidLimit) || limits != nil {
				t.Fatalf("parseOverride(%q) = %v, %v: want nil and an error wrapping ErrInvalidLimit", value, limits, err)
			}
			return
		}
		if v := verdictOf(limits); v != "" {
			if strings.TrimSpace(value) != string(v) {
				t.Fatalf("parseOverride(%q) = %v: only the word %s says that", value, limits, v)
			}
			return
		}
		checkOverride(t, value, limits)
		if v := strings.TrimSpace(value); (strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[")) && !json.Valid([]byte(v)) {
			t.Fatalf("accepted %q, which is not JSON, as JSON: %v", value, limits)
		}
		for _, again := range []string{overrideText(limits), overrideJSON(t, limits)} {
			got, err := parseOverride(again)
			if err != nil || !reflect.DeepEqual(got, limits) {
				t.Fatalf("%q gave %v; written again as %q it gives %v, %v", value, limits, again, got, err)
			}
		}
	})
}

// checkOverride fails unless limits, parsed from value, are at least one
// and each within the bounds the runtime decides.
func checkOverride(t *testing.T, value string, limits []Limit) {
	t.Helper()
	if len(limits) == 0 {
		t.Fatalf("accepted %q with no limits", value)
	}
	for _, l := range limits {
		if err := l.validate(); err != nil || l.Threshold <= 0 || l.Burst < 0 || l.Capacity < 0 || !l.Algorithm.Valid() {
			t.Fatalf("accepted %q with limit %+v: %v", value, l, err)
		}
	}
}

// overrideText writes limits in the text form of an override, one per line.
func overrideText(limits []Limit) string {
	var b strings.Builder
	for _, l := range limits {
		fmt.Fprintf(&b, "period=%s threshold=%d", cmp.Or(l.Calendar, l.Period.String()), l.Threshold)
		if l.TZ != "" {
			fmt.Fprintf(&b, " tz=%s", l.TZ)
		}
		if l.Algorithm != "" {
			fmt.Fprintf(&b, " algorithm=%s", l.Algorithm)
		}
		if l.Burst != 0 {
			fmt.Fprintf(&b, " burst=%d", l.Burst)
		}
		if l.Capacity != 0 {
			fmt.Fprintf(&b, " capacity=%d", l.Capacity)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// overrideJSON writes limits in the JSON form of an override.
func overrideJSON(t *testing.T, limits []Limit) string {
	t.Helper()
	type limit struct {
		Period    string    `json:"period"`
		Threshold int64     `json:"threshold"`
		Algorithm Algorithm `json:"algorithm,omitempty"`
		Burst     int64     `json:"burst,omitempty"`
		Capacity  int64     `json:"capacity,omitempty"`
		TZ        string    `json:"tz,omitempty"`
	}
	var list []limit
	for _, l := range limits {
		list = append(list, limit{cmp.Or(l.Calendar, l.Period.String()), l.Threshold, l.Algorithm, l.Burst, l.Capacity, l.TZ})
	}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
