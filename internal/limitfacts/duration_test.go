package limitfacts

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30":          30 * time.Second,
		"+30":         30 * time.Second,
		"0":           0,
		"-5":          -5 * time.Second,
		"500ms":       500 * time.Millisecond,
		"1m30s":       90 * time.Second,
		"1.5µs":       1500,
		"9223372036":  9223372036 * time.Second,
		"-9223372037": math.MinInt64, // too negative: negative all the same
		"-3000000h":   math.MinInt64,
	} {
		got, err := ParseDuration(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for in, want := range map[string]string{
		"":                     "want whole seconds (30) or a Go duration (500ms, 1m30s)",
		"3x":                   "want whole seconds (30) or a Go duration (500ms, 1m30s)",
		"30sec":                "want whole seconds (30) or a Go duration (500ms, 1m30s)",
		" 30":                  "want whole seconds (30) or a Go duration (500ms, 1m30s)",
		"1e3":                  "want whole seconds (30) or a Go duration (500ms, 1m30s)",
		"9223372037":           "too long (max 9223372036 seconds)",
		"99999999999999999999": "too long (max 9223372036 seconds)",
		"3000000h":             "too long (max 2562047h47m16s)",
	} {
		_, err := ParseDuration(in)
		assert.EqualError(t, err, want, in)
	}
}

// FuzzParseDuration checks the parsing of periods and waits, which reads
// directives and the values operators write into an overrides hash:
// ParseDuration never panics, never wraps around (a value's sign is its
// text's), reads whole seconds as seconds and anything else as
// time.ParseDuration does, and a duration it returns reads back the same
// from its String.
func FuzzParseDuration(f *testing.F) {
	for _, seed := range []string{"30", "+7", "-5", "0", "500ms", "1m30s", "1.5µs", "9223372036", "9223372037", "-9223372037", "3000000h", "-3000000h", "3x", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if err.Error() == "" || d != 0 {
				t.Fatalf("ParseDuration(%q) = %v, %q: want 0 and a message", s, d, err)
			}
			return
		}
		negative := strings.HasPrefix(s, "-")
		if negative && d > 0 || !negative && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v: the sign changed", s, d)
		}
		if d == math.MinInt64 {
			return // a negative value too large to hold, for the caller to reject
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if d != time.Duration(n)*time.Second || d/time.Second != time.Duration(n) {
				t.Fatalf("ParseDuration(%q) = %v, want %d seconds", s, d, n)
			}
		} else if want, err := time.ParseDuration(s); err != nil || d != want {
			t.Fatalf("ParseDuration(%q) = %v; time.ParseDuration gives %v, %v", s, d, want, err)
		}
		if again, err := ParseDuration(d.String()); err != nil || again != d {
			t.Fatalf("ParseDuration(%q) = %v, which reads back as %v, %v", s, d, again, err)
		}
	})
}
