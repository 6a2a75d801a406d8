package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main() // the service itself, for TestDeadRedis
		return
	}
	redistest.Main(m, &srv)
}

// runMainEnv makes the test binary run the service instead of the tests.
const runMainEnv = "HTTPSERVICE_RUN_MAIN"

// TestDeadRedis runs the service against a Redis that is gone: requests
// are decided in process, against the same limits (the default), and
// stderr says once that the
// breaker opened, without go-redis's dial errors or the callers' keys.
func TestDeadRedis(t *testing.T) {
	dead, err := redistest.Start()
	require.NoError(t, err)
	dead.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^$", "-addr", addr)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "REDIS_URL=redis://"+dead.Addr+"/0")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the service did not start: %s", &stderr)

	// The limit holds by default: decided in process, 5 per 10 s.
	served := 0
	for range 20 {
		resp, _ := do(t, http.MethodGet, "http://"+addr+"/search?q=x", "ada", nil)
		require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, resp.StatusCode)
		if resp.StatusCode == http.StatusOK {
			served++
		}
	}
	require.Equal(t, 5, served, "the search limit, 5 per 10 s, holds while Redis is down")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	out := stderr.String()
	assert.NotContains(t, out, "failed to dial")
	assert.Equal(t, 1, strings.Count(out, "ratelimit: circuit open"), out)
	assert.NotContains(t, out, "ada", "keys are logged as digests")
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

// stoppedClock reads one instant, after the test server's clock (see
// ratelimit.WithClock): a test's calls all fall in one window, however
// long a loaded machine takes to make them.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }

// eachBackend runs f against a fresh service on the in-process limiter
// and on a real, flushed Redis, made with opts.
func eachBackend(t *testing.T, f func(t *testing.T, base string), opts ...ratelimit.Option) {
	backends := map[string]func(t *testing.T) ratelimit.Limiter{
		"memory": func(*testing.T) ratelimit.Limiter { return ratelimit.NewMemory(opts...) },
		"redis": func(t *testing.T) ratelimit.Limiter {
			srv.Flush(t)
			c := srv.Client()
			t.Cleanup(func() { c.Close() })
			redisOpts := make([]redislimit.Option, len(opts))
			for i, o := range opts {
				redisOpts[i] = o
			}
			return redislimit.New(c, redisOpts...)
		},
	}
	for name, newLimiter := range backends {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(newHandler(newMemoryNotes(), newLimiter(t), adminToken))
			t.Cleanup(ts.Close)
			f(t, ts.URL)
		})
	}
}

// adminToken is the operators' token of the tests' services.
const adminToken = "operator-token"

func do(t *testing.T, method, u, user string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("X-User", user)
	if strings.Contains(u, "/admin/") && user == "operator" {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestSearchIsLimitedPerUserWith429(t *testing.T) {
	eachBackend(t, func(t *testing.T, base string) {
		for range 5 {
			resp, _ := do(t, "GET", base+"/search?q=x", "alice", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
		resp, body := do(t, "GET", base+"/search?q=x", "alice", nil)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "10", resp.Header.Get("Retry-After"))
		assert.Equal(t, `"notes.search";q=5;w=10`, resp.Header.Get("RateLimit-Policy"))
		assert.Equal(t, `"notes.search";r=0;t=10`, resp.Header.Get("RateLimit"))
		assert.Contains(t, body, "Too Many Requests")

		resp, _ = do(t, "GET", base+"/search?q=x", "bob", nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "bob has his own limit")
		resp, _ = do(t, "GET", base+"/count", "alice", nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "Count is not limited")
	}, ratelimit.WithClock(stoppedClock{}))
}

func TestPostNeedsBothLimits(t *testing.T) {
	eachBackend(t, func(t *testing.T, base string) {
		form := url.Values{"text": {"hello"}}
		for range 2 {
			resp, body := do(t, "POST", base+"/notes", "carol", form)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
		}
		resp, _ := do(t, "POST", base+"/notes", "carol", form)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"))
		assert.Equal(t, `"notes.post";q=2;w=1`, resp.Header.Get("RateLimit-Policy"), "the per-second limit denied")

		resp, body := do(t, "POST", base+"/notes", "dave", url.Values{"text": {""}})
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "the service's own errors pass through")
		assert.Contains(t, body, "empty note")

		_, body = do(t, "GET", base+"/search?q=hell", "carol", nil)
		assert.JSONEq(t, `["hello","hello"]`, body, "arguments and results pass through")
	}, ratelimit.WithClock(stoppedClock{}))
}

func TestExportWaitsForItsTurn(t *testing.T) {
	eachBackend(t, func(t *testing.T, base string) {
		// Two concurrent exports at once: one goes first, the other waits
		// (at most two seconds) for the next second's slot instead of a 429.
		// This one runs on the real clock, which must move for the wait.
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, _ := do(t, "GET", base+"/export", "erin", nil)
				codes[i] = resp.StatusCode
			}()
		}
		wg.Wait()
		assert.Equal(t, []int{http.StatusOK, http.StatusOK}, codes)
	})
}

func TestHealthIsLimitedPerClientIP(t *testing.T) {
	eachBackend(t, func(t *testing.T, base string) {
		for range 10 {
			resp, _ := do(t, "GET", base+"/health", "", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.NotEmpty(t, resp.Header.Get("RateLimit"), "admitted responses carry the RateLimit field")
		}
		resp, _ := do(t, "GET", base+"/health", "", nil)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, `"httpservice.health";q=10;w=1`, resp.Header.Get("RateLimit-Policy"))
	}, ratelimit.WithClock(stoppedClock{}))
}

// TestAdmittedResponsesCarryRateLimitFields: a response of a decorated
// call describes the limit that admitted it, the one with the fewest
// units left for a method with two; an unlimited method's has none.
func TestAdmittedResponsesCarryRateLimitFields(t *testing.T) {
	eachBackend(t, func(t *testing.T, base string) {
		for i := range 5 {
			resp, _ := do(t, "GET", base+"/search?q=x", "alice", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, `"notes.search";q=5;w=10`, resp.Header.Get("RateLimit-Policy"))
			assert.Equal(t, fmt.Sprintf(`"notes.search";r=%d;t=10`, 4-i), resp.Header.Get("RateLimit"))
		}
		resp, _ := do(t, "GET", base+"/search?q=x", "alice", nil)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, []string{`"notes.search";r=0;t=10`}, resp.Header.Values("RateLimit"), "a denial's fields only")

		resp, _ = do(t, "POST", base+"/notes", "bob", url.Values{"text": {"hi"}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, `"notes.post";q=2;w=1`, resp.Header.Get("RateLimit-Policy"), "2 per second has fewer left than 100 per minute")
		assert.Equal(t, `"notes.post";r=1;t=1`, resp.Header.Get("RateLimit"))

		resp, _ = do(t, "GET", base+"/count", "bob", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Empty(t, resp.Header.Values("RateLimit"), "Count is not limited")
	}, ratelimit.WithClock(stoppedClock{}))
}

// TestAdminView: operators list the generated rules and the service's own,
// see a user's state and reset it; nobody else gets in.
func TestAdminView(t *testing.T) {
	eachBackend(t, func(t *testing.T, base string) {
		resp, _ := do(t, "GET", base+"/admin/ratelimit/rules", "alice", nil)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token")

		resp, body := do(t, "GET", base+"/admin/ratelimit/rules", "operator", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var page struct {
			Rules []struct {
				Name   string `json:"name"`
				Limits []struct {
					Text string `json:"text"`
				} `json:"limits"`
				Wait string `json:"wait"`
			} `json:"rules"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		var names []string
		for _, r := range page.Rules {
			names = append(names, r.Name)
		}
		assert.Equal(t, []string{"notes.export", "notes.post", "notes.search", "httpservice.health"}, names)
		assert.Len(t, page.Rules[1].Limits, 2)
		assert.Equal(t, "2s", page.Rules[0].Wait)

		for range 5 {
			resp, _ := do(t, "GET", base+"/search?q=x", "carol", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
		resp, body = do(t, "GET", base+"/admin/ratelimit/key?name=notes.search&key=carol", "operator", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Contains(t, body, `"allowed":false`)

		resp, body = do(t, "POST", base+"/admin/ratelimit/key?name=notes.search&key=carol", "operator", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		resp, _ = do(t, "GET", base+"/search?q=x", "carol", nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "reset")
		assert.Equal(t, `"notes.search";r=4;t=10`, resp.Header.Get("RateLimit"))
	}, ratelimit.WithClock(stoppedClock{}))
}
