package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

func TestWriteErrorHeaders(t *testing.T) {
	le := &ratelimit.LimitError{
		Name:       "svc.Get",
		Key:        "u1",
		Limit:      ratelimit.Limit{Period: 30 * time.Second, Threshold: 2},
		Remaining:  0,
		RetryAfter: 1500 * time.Millisecond,
		ResetAfter: 29 * time.Second,
	}
	w := httptest.NewRecorder()
	require.True(t, WriteError(w, fmt.Errorf("get: %w", le)))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, http.Header{
		"Retry-After":            {"2"},
		"Ratelimit-Policy":       {`"svc.Get";q=2;w=30`},
		"Ratelimit":              {`"svc.Get";r=0;t=2`},
		"Content-Type":           {"text/plain; charset=utf-8"},
		"X-Content-Type-Options": {"nosniff"},
	}, w.Header())
	assert.Equal(t, "Too Many Requests: retry after 2 s\n", w.Body.String())
}

func TestWriteErrorRoundsUp(t *testing.T) {
	for _, c := range []struct {
		retry, period time.Duration
		remaining     int64
		want          string
		policy        string
		limit         string
	}{
		{time.Microsecond, 500 * time.Millisecond, 0, "1", `"n";q=5;w=1`, `"n";r=0;t=1`},
		{3 * time.Second, time.Hour, 2, "3", `"n";q=5;w=3600`, `"n";r=2;t=3`},
		{3*time.Second + 1, 1500 * time.Millisecond, -1, "4", `"n";q=5;w=2`, `"n";r=0;t=4`},
		{0, time.Second, 0, "1", `"n";q=5;w=1`, `"n";r=0;t=1`},
	} {
		w := httptest.NewRecorder()
		require.True(t, WriteError(w, &ratelimit.LimitError{Name: "n", Limit: ratelimit.Limit{Period: c.period, Threshold: 5}, Remaining: c.remaining, RetryAfter: c.retry}))
		assert.Equal(t, c.want, w.Header().Get("Retry-After"), "%+v", c)
		assert.Equal(t, c.policy, w.Header().Get("RateLimit-Policy"), "%+v", c)
		assert.Equal(t, c.limit, w.Header().Get("RateLimit"), "%+v", c)
	}
}

func TestWriteErrorIgnoresOtherErrors(t *testing.T) {
	for _, err := range []error{
		nil,
		errors.New("boom"),
		&ratelimit.BackendError{Name: "x", Err: errors.New("down")},
		&ratelimit.CostError{Name: "x", Cost: 9},
		context.Canceled,
	} {
		w := httptest.NewRecorder()
		assert.False(t, WriteError(w, err))
		assert.Empty(t, w.Header())
		assert.Empty(t, w.Body.String())
		assert.False(t, w.Flushed)
		assert.Equal(t, http.StatusOK, w.Code, "nothing written")
	}
}

func TestWriteErrorOfACancelledWait(t *testing.T) {
	l := ratelimit.NewMemory()
	rule := &ratelimit.Rule{Name: "w", Limits: perPeriod(1, time.Minute), Wait: time.Hour}
	require.NoError(t, rule.Check(context.Background(), l, 1, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second) // beyond the retry
	time.AfterFunc(10*time.Millisecond, cancel)
	err := rule.Check(ctx, l, 1, "")
	require.ErrorIs(t, err, context.Canceled)
	w := httptest.NewRecorder()
	require.True(t, WriteError(w, err))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "60", w.Header().Get("Retry-After"))
}

func TestHeaderNamesAreStructuredStrings(t *testing.T) {
	assert.Equal(t, `"a\"b\\c"`, sfString(`a"b\c`))
	assert.Equal(t, `"caf%C3%A9 100%25%0A"`, sfString("café 100%\n"))
	assert.Equal(t, `"example.com/svc.Store.Get"`, sfString("example.com/svc.Store.Get"))
}

func TestSetHeaders(t *testing.T) {
	h := http.Header{}
	SetHeaders(h, ratelimit.Decision{Allowed: true, Remaining: 7, ResetAfter: 500 * time.Millisecond}, ratelimit.Limit{Period: 500 * time.Millisecond, Threshold: 10}, "fast")
	SetHeaders(h, ratelimit.Decision{Allowed: true, Remaining: 90, ResetAfter: 59*time.Minute + 1}, ratelimit.Limit{Period: time.Hour, Threshold: 100}, "slow")
	assert.Equal(t, []string{`"fast";q=10;w=1`, `"slow";q=100;w=3600`}, h.Values("RateLimit-Policy"))
	assert.Equal(t, []string{`"fast";r=7;t=1`, `"slow";r=90;t=3541`}, h.Values("RateLimit"))

	h = http.Header{}
	SetHeaders(h, ratelimit.Decision{Remaining: 0, RetryAfter: 2500 * time.Millisecond, ResetAfter: time.Minute}, ratelimit.Limit{Period: time.Minute, Threshold: 3}, "d")
	assert.Equal(t, `"d";r=0;t=3`, h.Get("RateLimit"), "a denial's t is its retry")
}

// TestSetAdmissionHeaders: a handler that checks a rule with a context
// from ratelimit.WithAdmission, as a generated decorator does, answers
// admitted requests with the fields of the admission and denied ones with
// WriteError's.
func TestSetAdmissionHeaders(t *testing.T) {
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{Name: "get", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 2}, {Period: time.Hour, Threshold: 50}}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, admission := ratelimit.WithAdmission(r.Context())
		if WriteError(w, rule.Check(ctx, l, 1, "k")) {
			return
		}
		SetAdmissionHeaders(w.Header(), admission())
		fmt.Fprint(w, "ok")
	})
	w := request(h, "/")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `"get";q=2;w=60`, w.Header().Get("RateLimit-Policy"), "the limit with the fewest units left")
	assert.Equal(t, `"get";r=1;t=60`, w.Header().Get("RateLimit"))
	w = request(h, "/")
	assert.Equal(t, `"get";r=0;t=60`, w.Header().Get("RateLimit"))
	w = request(h, "/")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, []string{`"get";r=0;t=60`}, w.Header().Values("RateLimit"), "the denial's fields only")

	h2 := http.Header{}
	SetAdmissionHeaders(h2, ratelimit.Admission{})
	assert.Empty(t, h2, "nothing recorded, nothing set")
}

// serve sends a GET from remote with the given X-Forwarded-For fields.
func serve(h http.Handler, remote string, xff ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func okHandler(calls *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*calls++
		fmt.Fprint(w, "ok")
	})
}

func TestMiddlewareLimitsByClientIP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		rule := &ratelimit.Rule{Name: "GET /", Limits: perPeriod(2, time.Minute)}
		calls := 0
		h := Middleware(l, rule, ClientIP())(okHandler(&calls))

		w := serve(h, "192.0.2.1:1000")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, `"GET /";q=2;w=60`, w.Header().Get("RateLimit-Policy"))
		assert.Equal(t, `"GET /";r=1;t=60`, w.Header().Get("RateLimit"))
		w = serve(h, "192.0.2.1:1001")
		assert.Equal(t, `"GET /";r=0;t=60`, w.Header().Get("RateLimit"))
		w = serve(h, "192.0.2.1:1002")
		assert.Equal(t, http.StatusTooManyRequests, w.Code)
		assert.Equal(t, "60", w.Header().Get("Retry-After"))
		assert.Equal(t, 2, calls, "the denied request did not reach the handler")

		assert.Equal(t, http.StatusOK, serve(h, "192.0.2.2:1000").Code, "another client")
	})
}

func TestMiddlewareIgnoresSpoofedForwardedFor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter(ratelimit.WithClock(newManualClock()))
		rule := &ratelimit.Rule{Name: "spoof", Limits: perPeriod(1, time.Minute)}
		calls := 0
		h := Middleware(l, rule, ClientIP(netip.MustParsePrefix("10.0.0.0/8")))(okHandler(&calls))

		// A client talking to the server directly cannot pick its key.
		assert.Equal(t, http.StatusOK, serve(h, "203.0.113.9:1", "198.51.100.1").Code)
		for _, spoof := range []string{"198.51.100.2", "10.0.0.7", "203.0.113.10, 10.0.0.1", "garbage"} {
			assert.Equal(t, http.StatusTooManyRequests, serve(h, "203.0.113.9:2", spoof).Code, spoof)
		}

		// Behind the trusted proxy the client is the address the proxy
		// appended, whatever the client wrote to the left of it.
		assert.Equal(t, http.StatusOK, serve(h, "10.0.0.1:1", "198.51.100.7").Code)
		for _, spoof := range [][]string{
			{"198.51.100.8, 198.51.100.7"},
			{"10.0.0.5, 198.51.100.7"},
			{"198.51.100.8", "198.51.100.7"},
			{"garbage, 198.51.100.7, 10.0.0.2"},
		} {
			assert.Equal(t, http.StatusTooManyRequests, serve(h, "10.0.0.1:2", spoof...).Code, spoof)
		}
		assert.Equal(t, 2, calls)
	})
}

func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	key := ClientIP(trusted...)
	cases := []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.1:80", nil, "192.0.2.1"},
		{"192.0.2.1:80", []string{"1.2.3.4"}, "192.0.2.1"},
		{"10.0.0.1:80", nil, "10.0.0.1"},
		{"10.0.0.1:80", []string{"1.2.3.4"}, "1.2.3.4"},
		{"10.0.0.1:80", []string{" 9.9.9.9 , 1.2.3.4 , 10.1.1.1 "}, "1.2.3.4"},
		{"10.0.0.1:80", []string{"9.9.9.9", "1.2.3.4, 10.1.1.1"}, "1.2.3.4"},
		{"10.0.0.1:80", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{"10.0.0.1:80", []string{"1.2.3.4, junk"}, "10.0.0.1"},
		{"10.0.0.1:80", []string{"1.2.3.4,"}, "10.0.0.1"},
		{"10.0.0.1:80", []string{"1.2.3.4:5555"}, "1.2.3.4"},
		{"10.0.0.1:80", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"[2001:db8:ffff::1]:80", []string{"::ffff:1.2.3.4"}, "1.2.3.4"},
		{"[::ffff:10.0.0.1]:80", []string{"1.2.3.4"}, "1.2.3.4"},
		{"[fe80::1%eth0]:80", nil, "fe80::1"},
		{"192.0.2.1", nil, "192.0.2.1"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, err := key(r)
		if assert.NoError(t, err, "%+v", c) {
			assert.Equal(t, c.want, got, "%+v", c)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "pipe"
	_, err := key(r)
	assert.ErrorContains(t, err, `ratelimit: remote address "pipe"`)
}

func TestMiddlewareHeaderKey(t *testing.T) {
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{Name: "api", Limits: perPeriod(1, time.Minute)}
	calls := 0
	h := Middleware(l, rule, FromHeader("X-API-Key"))(okHandler(&calls))
	send := func(key string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	assert.Equal(t, http.StatusBadRequest, send(""))
	assert.Equal(t, http.StatusOK, send("k1"))
	assert.Equal(t, http.StatusTooManyRequests, send("k1"))
	assert.Equal(t, http.StatusOK, send("k2"))
	assert.Equal(t, 2, calls)
}

func TestMiddlewareBackendFailures(t *testing.T) {
	client := newUnreachableClient(t)
	for _, c := range []struct {
		policy ratelimit.ErrorPolicy
		code   int
		calls  int
	}{{ratelimit.FailOpen, http.StatusOK, 1}, {ratelimit.FailClosed, http.StatusServiceUnavailable, 0}} {
		l := redislimit.New(client)
		rule := &ratelimit.Rule{Name: "down", Limits: perPeriod(1, time.Minute), OnError: c.policy}
		calls := 0
		w := serve(Middleware(l, rule, nil)(okHandler(&calls)), "192.0.2.1:1")
		assert.Equal(t, c.code, w.Code, c.policy)
		assert.Equal(t, c.calls, calls, c.policy)
		assert.Empty(t, w.Header().Get("RateLimit"), "no decision, no fields")
	}
}

func TestMiddlewareShadowAndInvalidRules(t *testing.T) {
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	calls := 0
	shadow := Middleware(l, &ratelimit.Rule{Name: "sh", Limits: perPeriod(1, time.Minute), Shadow: true}, nil)(okHandler(&calls))
	for range 3 {
		w := serve(shadow, "192.0.2.1:1")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Empty(t, w.Header().Get("RateLimit"), "a shadow limit is not advertised")
	}
	invalid := Middleware(l, &ratelimit.Rule{Name: "bad", Limits: perPeriod(0, time.Minute)}, nil)(okHandler(&calls))
	assert.Equal(t, http.StatusInternalServerError, serve(invalid, "192.0.2.1:1").Code)
	assert.Equal(t, 3, calls)
}

// TestSetAdmissionHeadersOfAKeyPerLimit: a call with a key per limit lists
// every limit's policy, named by its key expression, and the denial names
// the denying limit's; no header holds a key's value.
func TestSetAdmissionHeadersOfAKeyPerLimit(t *testing.T) {
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{
		Name:     "post",
		Limits:   []ratelimit.Limit{{Period: time.Second, Threshold: 2}, {Period: time.Hour, Threshold: 1000}, {Period: time.Minute, Threshold: 5}},
		KeyExprs: []string{"user", "", "user"},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, admission := ratelimit.WithAdmission(r.Context())
		if WriteError(w, rule.Check(ctx, l, 1, "alice", "", "alice")) {
			return
		}
		SetAdmissionHeaders(w.Header(), admission())
		fmt.Fprint(w, "ok")
	})
	w := request(h, "/")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, []string{`"post/user";q=2;w=1`, `"post";q=1000;w=3600`, `"post/user#2";q=5;w=60`}, w.Header().Values("RateLimit-Policy"))
	assert.Equal(t, []string{`"post/user";r=1;t=1`}, w.Header().Values("RateLimit"))
	request(h, "/")
	w = request(h, "/")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, []string{`"post/user";q=2;w=1`}, w.Header().Values("RateLimit-Policy"))
	for name, values := range w.Header() {
		for _, v := range values {
			assert.NotContains(t, v, "alice", name)
		}
	}
	assert.NotContains(t, w.Body.String(), "alice")
}
