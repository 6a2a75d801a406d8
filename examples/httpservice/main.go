// Httpservice is a small net/http service whose handlers call a
// rate-limited service interface (Notes, in notes.go) and answer a denied
// call with 429 Too Many Requests, Retry-After and the IETF RateLimit
// headers. A route that is not a Go method (/health) is limited by the
// runtime's HTTP middleware per client IP.
//
//	go run ./examples/httpservice [-addr 127.0.0.1:8080]
//
// uses the in-process limiter; with REDIS_URL set (such as
// redis://localhost:6379/0) the limits live in Redis and are shared by
// every instance of the service. The user is named by the X-User header.
package main

//go:generate go run github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	quietDialErrors()
	limiter, backend, err := newLimiter(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("notes service on http://%s, limits in %s", *addr, backend)
	srv := &http.Server{Addr: *addr, Handler: newHandler(newMemoryNotes(), limiter), ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// newLimiter returns the in-process limiter, or a Redis one when url is
// set, and says which. Decisions and failures are logged.
func newLimiter(url string) (ratelimit.Limiter, string, error) {
	hook := ratelimit.WithHook(ratelimit.NewSlogHook(slog.Default()))
	if url == "" {
		return ratelimit.NewMemory(hook), "process memory", nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", fmt.Errorf("REDIS_URL: %w", err)
	}
	// ClientOptions bounds what a request costs while Redis is down: one
	// short timeout, no retries, until the limiter's circuit breaker opens.
	return redislimit.New(redis.NewClient(redislimit.ClientOptions(opts)), hook), "Redis at " + opts.Addr, nil
}

// quietDialErrors stops go-redis from logging each failed dial to stderr:
// the slog hook logs an outage once, when the breaker opens, and once when
// it closes.
func quietDialErrors() {
	redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial"}))
}

// healthRule limits /health, which is not a Go method, per client IP.
var healthRule = &ratelimit.Rule{
	Name:   "httpservice.health",
	Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 10}},
}

// newHandler routes the service's endpoints to notes, rate-limited by
// limiter.
func newHandler(notes Notes, limiter ratelimit.Limiter) http.Handler {
	limited := NewNotesWithRateLimit(notes, limiter)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		found, err := limited.Search(r.Context(), user(r), r.URL.Query().Get("q"))
		reply(w, found, err)
	})
	mux.HandleFunc("POST /notes", func(w http.ResponseWriter, r *http.Request) {
		err := limited.Post(r.Context(), user(r), r.FormValue("text"))
		reply(w, "stored", err)
	})
	mux.HandleFunc("GET /export", func(w http.ResponseWriter, r *http.Request) {
		text, err := limited.Export(r.Context(), user(r))
		reply(w, text, err)
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) {
		n, err := limited.Count(r.Context(), user(r))
		reply(w, n, err)
	})
	health := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /health", httplimit.Middleware(limiter, healthRule, httplimit.ClientIP())(health))
	return mux
}

// user names the caller; a real service would authenticate it.
func user(r *http.Request) string {
	if u := r.Header.Get("X-User"); u != "" {
		return u
	}
	return "anonymous"
}

// reply writes v as JSON, or the error: 429 with Retry-After and RateLimit
// headers for a denied call, 400 for a bad note, 503 when the limiter
// failed closed, 500 otherwise.
func reply(w http.ResponseWriter, v any, err error) {
	switch {
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	case httplimit.WriteError(w, err):
	case errors.Is(err, errEmpty):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, ratelimit.ErrBackend):
		http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
