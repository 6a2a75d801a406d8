// Httpservice is a small net/http service whose handlers call a
// rate-limited service interface (Notes, in notes.go) and answer a denied
// call with 429 Too Many Requests, Retry-After and the IETF RateLimit
// headers, and an admitted one with the RateLimit headers of its limit. A
// route that is not a Go method (/health) is limited by the runtime's HTTP
// middleware per client IP. Operators see the limits, and reset a user's,
// under /admin/ratelimit/ with the bearer token in $ADMIN_TOKEN.
//
//	ADMIN_TOKEN=s3cret go run ./examples/httpservice [-addr 127.0.0.1:8080]
//
// uses the in-process limiter; with REDIS_URL set (such as
// redis://localhost:6379/0) the limits live in Redis and are shared by
// every instance of the service. The user is named by the X-User header.
package main

//go:generate go run github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"strings"
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
	handler := newHandler(newMemoryNotes(), limiter, os.Getenv("ADMIN_TOKEN"))
	srv := &http.Server{Addr: *addr, Handler: handler, ReadHeaderTimeout: 5 * time.Second}
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
	limiter := redislimit.New(redis.NewClient(redislimit.ClientOptions(opts)), hook)
	// Say at start-up whether Redis can decide calls; if not, the service
	// runs on and each rule's onerror policy decides until it can (the
	// client's short timeouts bound the check).
	if err := limiter.HealthCheck(context.Background()); err != nil {
		log.Printf("WARNING: %v; calls follow their onerror policy until Redis answers", err)
	}
	return limiter, "Redis at " + opts.Addr, nil
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
// limiter, and the operator's view of the limits to those who send
// adminToken.
func newHandler(notes Notes, limiter ratelimit.Limiter, adminToken string) http.Handler {
	limited := NewNotesWithRateLimit(notes, limiter)
	mux := http.NewServeMux()
	mux.Handle("GET /search", handle(func(ctx context.Context, r *http.Request) (any, error) {
		return limited.Search(ctx, user(r), r.URL.Query().Get("q"))
	}))
	mux.Handle("POST /notes", handle(func(ctx context.Context, r *http.Request) (any, error) {
		return "stored", limited.Post(ctx, user(r), r.FormValue("text"))
	}))
	mux.Handle("GET /export", handle(func(ctx context.Context, r *http.Request) (any, error) {
		return limited.Export(ctx, user(r))
	}))
	mux.Handle("GET /count", handle(func(ctx context.Context, r *http.Request) (any, error) {
		return limited.Count(ctx, user(r))
	}))
	health := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /health", httplimit.Middleware(limiter, healthRule, httplimit.ClientIP())(health))
	// The generated RateLimitRules returns the rules of this package's
	// decorators; healthRule is the service's own.
	mux.Handle("/admin/ratelimit/", operatorsOnly(adminToken, httplimit.AdminHandler(limiter, append(RateLimitRules(), healthRule), httplimit.WithAdminReset())))
	return mux
}

// handle answers a request with what call returns for it, given a context
// that records the admission of the decorated call it makes: the result
// as JSON with the RateLimit header fields of that admission, or the
// error (see reply).
func handle(call func(ctx context.Context, r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, admission := ratelimit.WithAdmission(r.Context())
		v, err := call(ctx, r)
		if err == nil {
			httplimit.SetAdmissionHeaders(w.Header(), admission())
		}
		reply(w, v, err)
	})
}

// operatorsOnly passes to next the requests that carry the bearer token,
// and answers others 401 Unauthorized; with no token, every request. A
// real service would use its own authentication.
func operatorsOnly(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token == "" || !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
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
