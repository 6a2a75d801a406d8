package routers

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	redistest.Main(m, &srv)
}

// eachBackend runs f once with the in-process limiter and once with a
// limiter on the test's real Redis server, each with no calls seen.
func eachBackend(t *testing.T, f func(t *testing.T, limiter ratelimit.Limiter)) {
	t.Run("memory", func(t *testing.T) { f(t, ratelimit.NewMemory()) })
	t.Run("redis", func(t *testing.T) {
		srv.Flush(t)
		client := srv.Client()
		t.Cleanup(func() { client.Close() })
		f(t, redislimit.New(client))
	})
}

// serve runs h on a real server on loopback and returns its URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// get sends GET url and returns the response with its body read.
func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}

// requireLimited checks that the server at url admits two GET /search of
// a client, with the RateLimit and X-RateLimit fields counting down,
// denies the third with 429, Retry-After and X-RateLimit-Remaining 0, and
// returns the denial's body.
func requireLimited(t *testing.T, url string) string {
	t.Helper()
	for _, remaining := range []string{"1", "0"} {
		res, body := get(t, url+"/search")
		require.Equal(t, http.StatusOK, res.StatusCode, body)
		assert.Equal(t, "results\n", body)
		assert.Equal(t, `"search";q=2;w=60`, res.Header.Get("RateLimit-Policy"))
		assert.Equal(t, "2", res.Header.Get("X-RateLimit-Limit"))
		assert.Equal(t, remaining, res.Header.Get("X-RateLimit-Remaining"))
		requireResetAhead(t, res.Header.Get("X-RateLimit-Reset"))
	}
	res, body := get(t, url+"/search")
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, body)
	retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, retry >= 1 && retry <= 60, "Retry-After %d within the period", retry)
	assert.Equal(t, "2", res.Header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", res.Header.Get("X-RateLimit-Remaining"))
	requireResetAhead(t, res.Header.Get("X-RateLimit-Reset"))
	assert.NotContains(t, body, "results")
	return body
}

// requireResetAhead checks that an X-RateLimit-Reset is a Unix time at
// most a period (plus the second it is rounded up by) ahead.
func requireResetAhead(t *testing.T, reset string) {
	t.Helper()
	sec, err := strconv.ParseInt(reset, 10, 64)
	require.NoError(t, err, "X-RateLimit-Reset %q", reset)
	assert.LessOrEqual(t, sec, time.Now().Add(time.Minute+time.Second).Unix())
	assert.Greater(t, sec, time.Now().Add(-time.Second).Unix())
}

func TestChi(t *testing.T) {
	eachBackend(t, func(t *testing.T, limiter ratelimit.Limiter) {
		url := serve(t, Chi(limiter))
		for range 3 { // skipped: neither counted nor limited
			res, body := get(t, url+"/health")
			require.Equal(t, http.StatusOK, res.StatusCode)
			assert.Equal(t, "ok\n", body)
			assert.Empty(t, res.Header.Get("X-RateLimit-Limit"))
		}
		body := requireLimited(t, url)
		assert.Contains(t, body, "Too Many Requests")
		res, _ := get(t, url+"/health")
		assert.Equal(t, http.StatusOK, res.StatusCode, "a skipped route is not limited")
	})
}

func TestEcho(t *testing.T) {
	eachBackend(t, func(t *testing.T, limiter ratelimit.Limiter) {
		body := requireLimited(t, serve(t, Echo(limiter)))
		assert.Contains(t, body, "Too Many Requests")
	})
}

func TestGin(t *testing.T) {
	eachBackend(t, func(t *testing.T, limiter ratelimit.Limiter) {
		body := requireLimited(t, serve(t, GinEngine(limiter)))
		var denial httplimit.ErrorBody
		require.NoError(t, json.Unmarshal([]byte(body), &denial), body)
		assert.Equal(t, "rate_limited", denial.Error)
		assert.Equal(t, "search", denial.Policy)
		assert.Positive(t, denial.RetryAfter)
	})
}
