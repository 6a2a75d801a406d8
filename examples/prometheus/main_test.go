package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimitprom "github.com/ratelimitgen/ratelimitgen/adapters/prometheus"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestServiceCountsWhatItServes: the service's /metrics reports the
// requests its limited routes admitted and denied, and how long the
// limiter took to decide them.
func TestServiceCountsWhatItServes(t *testing.T) {
	metrics := &ratelimit.Metrics{}
	limiter := ratelimitprom.Instrument(ratelimit.NewMemory(ratelimit.WithHook(metrics)))
	srv := httptest.NewServer(newHandler(limiter, metrics))
	defer srv.Close()
	codes := make([]int, 0, 6)
	for range 6 {
		codes = append(codes, get(t, srv.URL+"/hello").StatusCode)
	}
	assert.Equal(t, []int{200, 200, 200, 200, 200, 429}, codes)
	for range 3 {
		assert.Equal(t, 200, get(t, srv.URL+"/beta").StatusCode, "a shadow limit never denies")
	}

	res := get(t, srv.URL+"/metrics")
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	for _, line := range []string{
		`ratelimit_decisions_total{decision="allowed",name="hello"} 5`,
		`ratelimit_decisions_total{decision="limited",name="hello"} 1`,
		`ratelimit_decisions_total{decision="allowed",name="beta"} 2`,
		`ratelimit_decisions_total{decision="shadow_limited",name="beta"} 1`,
		`ratelimit_decision_duration_seconds_count{name="hello",source="backend"} 6`,
		`ratelimit_decision_duration_seconds_count{name="beta",source="backend"} 3`,
	} {
		assert.Contains(t, string(body), line+"\n")
	}
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	t.Cleanup(func() { res.Body.Close() })
	return res
}
