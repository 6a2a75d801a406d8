package limitfacts

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

// maxSeconds is the largest whole number of seconds a time.Duration holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// errWantDuration is the error of text that is not a duration at all.
var errWantDuration = errors.New("want whole seconds (30) or a Go duration (500ms, 1m30s)")

// durationSyntax matches what time.ParseDuration accepts apart from "0", so
// a string it matches but ParseDuration rejects is out of range.
var durationSyntax = regexp.MustCompile(`^[-+]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// ParseDuration parses a period or a wait as directives and overrides
// write it: whole seconds ("30", "-5") or a Go duration ("500ms",
// "1m30s"). A negative value too large for a time.Duration comes back as
// math.MinInt64, for the caller to reject as negative; a positive one is
// an error, never a wrapped-around value. Errors say what was wanted, such
// as "too long (max 9223372036 seconds)".
func ParseDuration(s string) (time.Duration, error) {
	if isWholeNumber(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err == nil && -maxSeconds <= n && n <= maxSeconds:
			return time.Duration(n) * time.Second, nil
		case s[0] == '-':
			return math.MinInt64, nil
		}
		return 0, fmt.Errorf("too long (max %d seconds)", maxSeconds)
	}
	v, err := time.ParseDuration(s)
	switch {
	case err == nil:
		return v, nil
	case !durationSyntax.MatchString(s):
		return 0, errWantDuration
	case s[0] == '-':
		return math.MinInt64, nil
	}
	return 0, fmt.Errorf("too long (max %s)", time.Duration(maxSeconds)*time.Second)
}

// isWholeNumber reports whether s is decimal digits with an optional sign.
func isWholeNumber(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || '9' < s[i] {
			return false
		}
	}
	return true
}
