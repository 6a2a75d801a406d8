package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
)

// TestMiddlewareHoldsASlotPerRequest: a rule with a concurrency limit
// admits one request in flight; another gets 429 until it is served, and
// a handler that panics gives its slot back.
func TestMiddlewareHoldsASlotPerRequest(t *testing.T) {
	rule := &ratelimit.Rule{Name: "inflight", Limits: []ratelimit.Limit{{Algorithm: "concurrency", Threshold: 1, Period: time.Minute}}}
	started, answer := make(chan struct{}), make(chan struct{})
	h := httplimit.Middleware(ratelimit.NewMemory(), rule, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
		started <- struct{}{}
		<-answer
	}))
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		done <- w.Code
	}()
	<-started
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.NotEmpty(t, w.Header().Get("Retry-After"))
	close(answer)
	require.Equal(t, http.StatusOK, <-done)

	func() {
		defer func() { recover() }()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/panic", nil))
	}()
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		done <- w.Code
	}()
	<-started // the panicking request gave its slot back
	require.Equal(t, http.StatusOK, <-done)
}
