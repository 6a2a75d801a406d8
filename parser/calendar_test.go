package parser

import (
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCalendarDirectives(t *testing.T) {
	pos := token.Position{Filename: "x.go", Line: 5, Column: 1}
	for _, tt := range []struct {
		line string
		want Directive
		text string
	}{
		{"//ratelimit:period=month threshold=10000", Directive{Calendar: "month", Threshold: 10000}, "//ratelimit:period=month threshold=10000"},
		{"//ratelimit:tz=Europe/Paris period=day threshold=3 algorithm=fixed_window",
			Directive{Calendar: "day", TZ: "Europe/Paris", Threshold: 3, Algorithm: "fixed_window"},
			"//ratelimit:period=day threshold=3 tz=Europe/Paris algorithm=fixed_window"},
		{"//ratelimit:period=week threshold=1 tz=UTC", Directive{Calendar: "week", TZ: "UTC", Threshold: 1}, "//ratelimit:period=week threshold=1 tz=UTC"},
		{`//ratelimit:period="year" threshold=1 tz="America/New_York"`, Directive{Calendar: "year", TZ: "America/New_York", Threshold: 1}, "//ratelimit:period=year threshold=1 tz=America/New_York"},
	} {
		d, errs := ParseComment(pos, tt.line)
		require.Empty(t, errs, tt.line)
		assert.Equal(t, tt.want, values(d), tt.line)
		assert.Equal(t, tt.text, d.String())
	}
}

func TestCalendarErrors(t *testing.T) {
	pos := token.Position{Filename: "x.go", Line: 5, Column: 1}
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"//ratelimit:period=monthly threshold=1", []string{`x.go:5:20: period "monthly": unknown calendar period; did you mean month?`}},
		{"//ratelimit:period=fortnight threshold=1", []string{`x.go:5:20: period "fortnight": want a calendar period (day, week, month, year), whole seconds (30) or a Go duration (500ms, 1m30s)`}},
		{"//ratelimit:period=month threshold=1 tz=Europe/Pariss", []string{`x.go:5:41: tz "Europe/Pariss": unknown time zone; want an IANA name such as Europe/Paris or UTC`}},
		{"//ratelimit:period=month threshold=1 tz=Local", []string{`x.go:5:41: tz "Local": each machine's own zone: name an IANA zone such as Europe/Paris`}},
		{"//ratelimit:period=30 threshold=1 tz=Europe/Paris", []string{`x.go:5:35: tz is for a calendar period (day, week, month, year), not a period of 30s`}},
		{"//ratelimit:period=month threshold=1 algorithm=token_bucket", []string{`x.go:5:38: calendar period month is for fixed_window, not token_bucket`}},
		{"//ratelimit:period=day threshold=5 algorithm=sliding_log cost=9", []string{`x.go:5:58: cost 9 exceeds threshold 5: no call could ever be admitted`}},
	} {
		_, errs := ParseComment(pos, tt.line)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		assert.Equal(t, tt.want, got, tt.line)
	}
}
