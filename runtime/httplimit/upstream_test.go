package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"0", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"3600", ratelimit.MaxCooldown, true},
		{"999999999999", ratelimit.MaxCooldown, true},
		{"99999999999999999999999999", ratelimit.MaxCooldown, true}, // beyond uint64
		{"Fri, 27 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Friday, 27-Nov-26 12:01:00 GMT", time.Minute, true}, // RFC 850
		{"Fri Nov 27 12:00:10 2026", 10 * time.Second, true},  // asctime
		{"Fri, 27 Nov 2026 11:59:00 GMT", 0, false},           // past
		{"Fri, 27 Nov 9999 12:00:00 GMT", ratelimit.MaxCooldown, true},
		{"Fri, 32 Nov 2026 12:00:00 GMT", 0, false},
	} {
		got, ok := ParseRetryAfter(c.value, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %s, %t; want %s, %t", c.value, got, ok, c.want, c.ok)
		}
	}
}

func TestResponseErrorCoolsOnlyARefusalWithARetry(t *testing.T) {
	date := "Fri, 27 Nov 2026 12:00:00 GMT"
	resp := func(status int, retry string) *http.Response {
		h := http.Header{"Date": {date}}
		if retry != "" {
			h.Set("Retry-After", retry)
		}
		return &http.Response{StatusCode: status, Header: h}
	}
	for _, c := range []struct {
		resp *http.Response
		want time.Duration // 0: no error
	}{
		{nil, 0},
		{resp(200, "5"), 0},
		{resp(500, "5"), 0},
		{resp(429, ""), 0},
		{resp(429, "junk"), 0},
		{resp(429, "7"), 7 * time.Second},
		{resp(503, "Fri, 27 Nov 2026 12:01:00 GMT"), time.Minute}, // against the response's Date
	} {
		err := ResponseError(c.resp)
		var ra interface{ RetryAfter() time.Duration }
		ok := errors.As(fmt.Errorf("call: %w", err), &ra)
		var d time.Duration
		if ok {
			d = ra.RetryAfter()
		}
		if c.want == 0 {
			if err != nil || ok {
				t.Errorf("%+v: %v, want none", c.resp, err)
			}
			continue
		}
		var ue *UpstreamError
		if !errors.As(err, &ue) || !ok || d != c.want {
			t.Errorf("%+v: %v (%s, %t), want a retry of %s", c.resp, err, d, ok, c.want)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "1e9", "Fri, 27 Nov 2026 12:00:30 GMT", "Mon Jan  2 15:04:05 2006", "99999999999999999999", " 7", "Friday, 27-Nov-26 12:01:00 GMT"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string) {
		d, ok := ParseRetryAfter(value, now)
		if ok != (d > 0) || d > ratelimit.MaxCooldown {
			t.Fatalf("ParseRetryAfter(%q) = %s, %t: want a positive wait of at most %s, or none", value, d, ok, ratelimit.MaxCooldown)
		}
	})
}
