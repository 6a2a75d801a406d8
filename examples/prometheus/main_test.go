package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimitprom "github.com/ratelimitgen/ratelimitgen/adapters/prometheus"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main() // the service itself, for TestDeadRedis
		return
	}
	os.Exit(m.Run())
}

// runMainEnv makes the test binary run the service instead of the tests.
const runMainEnv = "PROMETHEUS_RUN_MAIN"

// TestDeadRedis runs the service against a Redis that is gone: requests
// are decided in process against the same limit (the default), /metrics
// counts every failure and
// shows the breaker open, and go-redis's dial errors stay off stderr.
func TestDeadRedis(t *testing.T) {
	dead := freeAddr(t)
	addr := freeAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-addr", addr)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "REDIS_URL=redis://"+dead+"/0")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		res, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			res.Body.Close()
		}
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the service did not start: %s", &stderr)

	// The limit holds by default: decided in process, 5 per 10 s.
	served := 0
	for range 20 {
		code := get(t, "http://"+addr+"/hello").StatusCode
		require.Contains(t, []int{200, 429}, code)
		if code == 200 {
			served++
		}
	}
	assert.Equal(t, 5, served, "the limit, 5 per 10 s, holds while Redis is down")
	body, err := io.ReadAll(get(t, "http://"+addr+"/metrics").Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `ratelimit_backend_errors_total{name="hello"} 20`+"\n")
	assert.Contains(t, string(body), `ratelimit_breaker_open{node="`+dead+`"} 1`+"\n")
	assert.Contains(t, string(body), `ratelimit_breaker_opens_total{node="`+dead+`"} 1`+"\n")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	assert.NotContains(t, stderr.String(), "failed to dial")
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServiceCountsWhatItServes: the service's /metrics reports the
// requests its limited routes admitted and denied, and how long the
// limiter took to decide them.
func TestServiceCountsWhatItServes(t *testing.T) {
	metrics := &limitmetrics.Metrics{}
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
		`ratelimit_decisions_total{decision="allowed",name="hello",source="backend"} 5`,
		`ratelimit_decisions_total{decision="limited",name="hello",source="backend"} 1`,
		`ratelimit_decisions_total{decision="allowed",name="beta",source="backend"} 2`,
		`ratelimit_decisions_total{decision="shadow_limited",name="beta",source="backend"} 1`,
		`ratelimit_decision_duration_seconds_count{call="allow",name="hello",source="backend"} 6`,
		`ratelimit_decision_duration_seconds_count{call="allow",name="beta",source="backend"} 3`,
		`ratelimit_units_total{line="0",name="hello",outcome="allowed"} 5`,
		`ratelimit_units_total{line="0",name="hello",outcome="limited"} 1`,
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
