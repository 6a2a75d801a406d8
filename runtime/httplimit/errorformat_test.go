package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// denial is a LimitError of a rule with a key per limit, whose key must
// never reach a response.
func denial() *ratelimit.LimitError {
	return &ratelimit.LimitError{
		Name: "svc.Post", Key: "secret-api-key", KeyExpr: "tenant",
		Limit:     ratelimit.Limit{Period: time.Minute, Threshold: 100},
		Remaining: 3, RetryAfter: 2500 * time.Millisecond, ResetAfter: time.Minute,
	}
}

// rateLimitFields returns the fields of h that WriteError sets, but its
// Content-Type.
func rateLimitFields(h http.Header) http.Header {
	out := http.Header{}
	for _, k := range []string{"Retry-After", HeaderRateLimitPolicy, HeaderRateLimit} {
		out[k] = h.Values(k)
	}
	return out
}

// TestWriteErrorAsJSON: a JSON API answers a denial in JSON with the same
// status and fields as WriteError's text, without copying them out of a
// recorder; the body tells the client what the fields do, never the key.
func TestWriteErrorAsJSON(t *testing.T) {
	text := httptest.NewRecorder()
	require.True(t, WriteError(text, fmt.Errorf("post: %w", denial())))
	w := httptest.NewRecorder()
	require.True(t, WriteErrorAs(w, fmt.Errorf("post: %w", denial()), JSON))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, rateLimitFields(text.Header()), rateLimitFields(w.Header()))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
	var body ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	assert.Equal(t, ErrorBody{
		Error: "rate_limited", Message: "Too Many Requests: retry after 3 s",
		Policy: "svc.Post/tenant", RetryAfter: 3, Remaining: 3, Cause: "limit",
	}, body)
	assert.NotContains(t, w.Body.String(), "secret-api-key")
	assert.False(t, WriteErrorAs(httptest.NewRecorder(), fmt.Errorf("boom"), JSON), "not a denial")
}

// TestWriteErrorAsFunc: a function given the LimitError writes the body
// in the API's own format, with the same status and fields.
func TestWriteErrorAsFunc(t *testing.T) {
	text := httptest.NewRecorder()
	require.True(t, WriteError(text, denial()))
	problem := func(le *ratelimit.LimitError) (string, []byte) {
		return "application/problem+json", []byte(fmt.Sprintf(`{"type":"about:blank","status":429,"detail":"limit %s"}`, le.Name))
	}
	w := httptest.NewRecorder()
	require.True(t, WriteErrorAs(w, denial(), problem))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, rateLimitFields(text.Header()), rateLimitFields(w.Header()))
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"type":"about:blank","status":429,"detail":"limit svc.Post"}`, w.Body.String())
}

// headerOnly fails a test that writes a status or a body.
type headerOnly struct {
	t *testing.T
	h http.Header
}

func (w headerOnly) Header() http.Header { return w.h }
func (w headerOnly) Write([]byte) (int, error) {
	w.t.Error("Write called")
	return 0, nil
}
func (w headerOnly) WriteHeader(int) { w.t.Error("WriteHeader called") }

// TestSetErrorHeaders: the fields alone, for a handler that writes its
// own response; nothing for an error that is not a denial.
func TestSetErrorHeaders(t *testing.T) {
	text := httptest.NewRecorder()
	require.True(t, WriteError(text, denial()))
	w := headerOnly{t, http.Header{}}
	require.True(t, SetErrorHeaders(w.Header(), fmt.Errorf("post: %w", denial())))
	assert.Equal(t, rateLimitFields(text.Header()), rateLimitFields(w.Header()))
	assert.Empty(t, w.Header().Get("Content-Type"))
	h := http.Header{}
	assert.False(t, SetErrorHeaders(h, fmt.Errorf("boom")))
	assert.Empty(t, h)
}

// TestMiddlewareErrorFormat: the middleware answers denials in the
// format it is given.
func TestMiddlewareErrorFormat(t *testing.T) {
	rule := &ratelimit.Rule{Name: "mw.json", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}}
	h := Middleware(ratelimit.NewMemory(), rule, FromHeader("X-Key"), WithErrorFormat(JSON))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	var last *httptest.ResponseRecorder
	for range 2 {
		last = httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Key", "k")
		h.ServeHTTP(last, r)
	}
	assert.Equal(t, http.StatusTooManyRequests, last.Code)
	assert.Equal(t, "application/json", last.Header().Get("Content-Type"))
	var body ErrorBody
	require.NoError(t, json.Unmarshal(last.Body.Bytes(), &body))
	assert.Equal(t, "mw.json", body.Policy)
	assert.NotEmpty(t, last.Header().Get(HeaderRateLimit))
}
