package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestCollectorExportsEveryCounter: each counter of the Metrics hook
// reaches Prometheus under its limit's name.
func TestCollectorExportsEveryCounter(t *testing.T) {
	ctx := context.Background()
	metrics := &ratelimit.Metrics{}
	limiter := ratelimit.NewMemory(ratelimit.WithHook(metrics))
	search := &ratelimit.Rule{Name: "search", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}}}
	for i := range 11 {
		err := search.Check(ctx, limiter, "", 1)
		assert.Equal(t, i == 10, err != nil, "call %d: %v", i)
	}
	beta := &ratelimit.Rule{Name: "beta", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, Shadow: true}
	for range 3 {
		require.NoError(t, beta.Check(ctx, limiter, "", 1))
	}
	down := ratelimit.NewRedis(unreachable(t), ratelimit.WithHook(metrics))
	pay := &ratelimit.Rule{Name: "pay", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5}}, OnError: ratelimit.FailClosed}
	require.ErrorIs(t, pay.Check(ctx, down, "", 1), ratelimit.ErrBackend)
	steady := &ratelimit.Rule{Name: "steady", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, OnError: ratelimit.FailLocal}
	require.NoError(t, steady.Check(ctx, down, "", 1))
	require.ErrorIs(t, steady.Check(ctx, down, "", 1), ratelimit.ErrLimited, "the fallback keeps the limit")

	want := `
# HELP ratelimit_backend_errors_total Calls the rate limiter's backend could not decide.
# TYPE ratelimit_backend_errors_total counter
ratelimit_backend_errors_total{name="beta"} 0
ratelimit_backend_errors_total{name="pay"} 1
ratelimit_backend_errors_total{name="search"} 0
ratelimit_backend_errors_total{name="steady"} 2
# HELP ratelimit_decisions_total Rate limit decisions, by limit name and decision.
# TYPE ratelimit_decisions_total counter
ratelimit_decisions_total{decision="allowed",name="beta"} 1
ratelimit_decisions_total{decision="allowed",name="pay"} 0
ratelimit_decisions_total{decision="allowed",name="search"} 10
ratelimit_decisions_total{decision="allowed",name="steady"} 1
ratelimit_decisions_total{decision="limited",name="beta"} 0
ratelimit_decisions_total{decision="limited",name="pay"} 0
ratelimit_decisions_total{decision="limited",name="search"} 1
ratelimit_decisions_total{decision="limited",name="steady"} 1
ratelimit_decisions_total{decision="shadow_limited",name="beta"} 2
ratelimit_decisions_total{decision="shadow_limited",name="pay"} 0
ratelimit_decisions_total{decision="shadow_limited",name="search"} 0
ratelimit_decisions_total{decision="shadow_limited",name="steady"} 0
# HELP ratelimit_fallback_decisions_total Decisions made in process while the backend could not decide (onerror=local).
# TYPE ratelimit_fallback_decisions_total counter
ratelimit_fallback_decisions_total{name="beta"} 0
ratelimit_fallback_decisions_total{name="pay"} 0
ratelimit_fallback_decisions_total{name="search"} 0
ratelimit_fallback_decisions_total{name="steady"} 2
# HELP ratelimit_near_limit_total Admissions that left at most 10% of the limit's threshold.
# TYPE ratelimit_near_limit_total counter
ratelimit_near_limit_total{name="beta"} 1
ratelimit_near_limit_total{name="pay"} 0
ratelimit_near_limit_total{name="search"} 2
ratelimit_near_limit_total{name="steady"} 1
`
	require.NoError(t, testutil.CollectAndCompare(NewCollector(metrics), strings.NewReader(want)))
	problems, err := testutil.CollectAndLint(NewCollector(metrics))
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// TestServiceCountsWhatItServes: the service's /metrics reports the
// requests its limited routes admitted and denied.
func TestServiceCountsWhatItServes(t *testing.T) {
	metrics := &ratelimit.Metrics{}
	srv := httptest.NewServer(newHandler(ratelimit.NewMemory(ratelimit.WithHook(metrics)), metrics))
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

// unreachable returns a client of a loopback port nobody listens on.
func unreachable(t *testing.T) *redis.Client {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}
