package httplimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// UpstreamError is an upstream's refusal to serve a call for now: an HTTP
// 429 Too Many Requests or 503 Service Unavailable with a Retry-After
// header. Its RetryAfter method makes it an error that cools a line
// marked cooldown=true: return it, or an error wrapping it, from a
// limited method.
type UpstreamError struct {
	// StatusCode is the response's status: 429 or 503.
	StatusCode int
	// After is how long the upstream asked to wait, from its Retry-After,
	// at most ratelimit.MaxCooldown.
	After time.Duration
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("upstream: %d %s: retry after %s", e.StatusCode, http.StatusText(e.StatusCode), e.After)
}

// RetryAfter returns how long the upstream asked to wait.
func (e *UpstreamError) RetryAfter() time.Duration { return e.After }

// ResponseError returns the *UpstreamError of resp, an upstream's
// response, when it is a 429 or a 503 with a usable Retry-After (see
// ParseRetryAfter, at the response's Date, or now when it has none);
// else nil, also for a nil resp. It reads no body.
func ResponseError(resp *http.Response) error {
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return nil
	}
	now := time.Now()
	if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		now = date // an HTTP date is read against the upstream's clock
	}
	d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	if !ok {
		return nil
	}
	return &UpstreamError{StatusCode: resp.StatusCode, After: d}
}

// ParseRetryAfter reads the value of a Retry-After header (RFC 9110,
// 10.2.3): a number of seconds ("120") or an HTTP date ("Wed, 21 Oct
// 2015 07:28:00 GMT", or its obsolete forms), the latter counted from
// now. It returns the wait, capped at ratelimit.MaxCooldown, and whether
// the value was usable: a positive number of whole seconds or a date
// after now. A negative, zero, fractional or malformed value, or a date
// in the past, is not: ok is false. It never panics, whatever the value.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > 64 {
		return 0, false
	}
	if isDigits(value) {
		secs, err := strconv.ParseUint(value, 10, 64)
		if err != nil || secs == 0 { // too large: capped
			if err == nil {
				return 0, false
			}
			return ratelimit.MaxCooldown, true
		}
		if secs >= uint64(ratelimit.MaxCooldown/time.Second) {
			return ratelimit.MaxCooldown, true
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	d = at.Sub(now) // saturates, never overflows
	if d <= 0 {
		return 0, false
	}
	return min(d, ratelimit.MaxCooldown), true
}

// isDigits reports whether s is ASCII digits only.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
