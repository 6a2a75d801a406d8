package httplimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

func TestAdmitDescribesTheAdmission(t *testing.T) {
	ctx := context.Background()
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{Name: "two", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 2}, {Period: time.Hour, Threshold: 10}}}
	a, err := rule.Admit(ctx, l, 1, "k")
	require.NoError(t, err)
	assert.True(t, a.Decided)
	assert.True(t, a.Decision.Allowed)
	assert.Equal(t, int64(1), a.Decision.Remaining)
	assert.Equal(t, rule.Limits[0], a.Limit, "the limit with the fewest units left")
	assert.Equal(t, time.Minute, a.Decision.ResetAfter)
	_, err = rule.Admit(ctx, l, 1, "k")
	require.NoError(t, err)
	a, err = rule.Admit(ctx, l, 1, "k")
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, ratelimit.Admission{}, a, "a denial is the error")

	ov := &ratelimit.StaticOverrides{}
	ov.SetRule("two", ratelimit.Limit{Period: time.Minute, Threshold: 5}, ratelimit.Limit{Period: time.Hour, Threshold: 3})
	a, err = rule.Admit(ctx, ratelimit.NewMemory(ratelimit.WithOverrides(ov)), 1, "k")
	require.NoError(t, err)
	assert.Equal(t, ratelimit.Limit{Period: time.Hour, Threshold: 3}, a.Limit, "the override that applied")
	assert.Equal(t, int64(2), a.Decision.Remaining)

	shadow := &ratelimit.Rule{Name: "sh", Limits: perPeriod(1, time.Minute), Shadow: true}
	for range 2 {
		a, err = shadow.Admit(ctx, l, 1, "")
		require.NoError(t, err)
		assert.False(t, a.Decided, "a shadow rule's call is not described")
	}
	a, err = rule.Admit(ctx, redislimit.New(newUnreachableClient(t), ratelimit.WithErrorPolicy(ratelimit.FailOpen)), 1, "k")
	require.NoError(t, err, "fail open")
	assert.False(t, a.Decided, "no decision was made")
	a, err = rule.Admit(ctx, redislimit.New(newUnreachableClient(t)), 1, "k")
	require.NoError(t, err, "the default: decided in process")
	assert.True(t, a.Decided && a.Decision.Source == ratelimit.SourceFallback, "the fallback decided: %+v", a)
}

// request sends a GET of path to h and returns the response.
func request(h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

func TestMiddlewareDenyHandler(t *testing.T) {
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{Name: "api", Limits: perPeriod(1, time.Minute)}
	var denied *ratelimit.LimitError
	deny := func(w http.ResponseWriter, r *http.Request, err *ratelimit.LimitError) {
		denied = err
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]any{"error": "slow down", "retry_after": err.RetryAfter.Seconds()})
	}
	calls := 0
	h := Middleware(l, rule, nil, WithDenyHandler(deny))(okHandler(&calls))
	assert.Equal(t, http.StatusOK, request(h, "/").Code)
	w := request(h, "/")
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.JSONEq(t, `{"error":"slow down","retry_after":60}`, w.Body.String())
	assert.Empty(t, w.Header().Get("Retry-After"), "the deny handler writes the whole response")
	require.NotNil(t, denied)
	assert.Equal(t, "api", denied.Name)
	assert.Equal(t, 1, calls)

	h = Middleware(l, rule, nil, WithDenyHandler(nil))(okHandler(&calls))
	assert.Equal(t, "60", request(h, "/").Header().Get("Retry-After"), "nil keeps WriteError")
}

func TestMiddlewareSkip(t *testing.T) {
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{Name: "api", Limits: perPeriod(2, time.Minute)}
	calls := 0
	health := func(r *http.Request) bool { return r.URL.Path == "/health" }
	h := Middleware(l, rule, nil, WithSkip(health))(okHandler(&calls))
	for range 5 {
		w := request(h, "/health")
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Empty(t, w.Header().Get("RateLimit"), "a skipped request is not described")
	}
	w := request(h, "/")
	assert.Equal(t, `"api";r=1;t=60`, w.Header().Get("RateLimit"), "skipped requests were not counted")
	request(h, "/")
	assert.Equal(t, http.StatusTooManyRequests, request(h, "/").Code)
	assert.Equal(t, http.StatusOK, request(h, "/health").Code, "nor limited")
	assert.Equal(t, 8, calls)
}

// resetWithin asserts that the X-RateLimit-Reset of h is d after a time
// between before and after, in Unix seconds rounded up.
func resetWithin(t *testing.T, h http.Header, before, after time.Time, d time.Duration) {
	t.Helper()
	reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, reset, before.Add(d).Unix())
	assert.LessOrEqual(t, reset, after.Add(d+time.Second).Unix())
}

func TestMiddlewareXRateLimit(t *testing.T) {
	l := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{Name: "api", Limits: perPeriod(2, time.Minute)}
	calls := 0
	h := Middleware(l, rule, nil, WithXRateLimit())(okHandler(&calls))
	before := time.Now()
	w := request(h, "/")
	after := time.Now()
	assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"))
	assert.Equal(t, "1", w.Header().Get("X-RateLimit-Remaining"))
	resetWithin(t, w.Header(), before, after, time.Minute)
	assert.Equal(t, `"api";r=1;t=60`, w.Header().Get("RateLimit"), "beside the IETF fields")

	request(h, "/")
	before = time.Now()
	w = request(h, "/")
	after = time.Now()
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", w.Header().Get("X-RateLimit-Remaining"))
	resetWithin(t, w.Header(), before, after, time.Minute)
	assert.Equal(t, "60", w.Header().Get("Retry-After"))

	w = request(Middleware(ratelimit.NewMemory(), rule, nil)(okHandler(&calls)), "/")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Empty(t, w.Header().Get("X-RateLimit-Limit"), "only when asked for")
}

func TestSetXRateLimit(t *testing.T) {
	h := http.Header{}
	h.Set("X-RateLimit-Remaining", "99")
	before := time.Now()
	SetXRateLimit(h, ratelimit.Limit{Period: time.Hour, Threshold: 100}, -3, 1500*time.Millisecond)
	after := time.Now()
	assert.Equal(t, []string{"100"}, h.Values("X-RateLimit-Limit"))
	assert.Equal(t, []string{"0"}, h.Values("X-RateLimit-Remaining"), "replaced, never negative")
	resetWithin(t, h, before, after, 1500*time.Millisecond)

	SetXRateLimit(h, ratelimit.Limit{Period: time.Hour, Threshold: 100}, 5, -time.Second)
	resetWithin(t, h, before, time.Now(), 0)
}

// TestMiddlewareFallsBackLocally: under FailLocal a request Redis cannot
// decide is decided in process, with the rule's RateLimit fields.
func TestMiddlewareFallsBackLocally(t *testing.T) {
	l := redislimit.New(newUnreachableClient(t))
	rule := &ratelimit.Rule{Name: "down", Limits: perPeriod(1, time.Minute), OnError: ratelimit.FailLocal}
	calls := 0
	h := Middleware(l, rule, nil)(okHandler(&calls))
	w := serve(h, "192.0.2.1:1")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `"down";r=0;t=60`, w.Header().Get("RateLimit"))
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "192.0.2.1:1").Code)
	assert.Equal(t, 1, calls)
}
