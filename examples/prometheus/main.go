// Prometheus exports a limiter's counters (limitmetrics.Metrics) and the
// latency of its decisions to Prometheus with the adapters/prometheus
// package (ratelimitprom), a module of its own so that the runtime
// depends on no metrics library.
//
//	cd examples/prometheus && go run . [-addr 127.0.0.1:8081]
//
// serves /hello, limited to 5 requests per 10 s per client IP, /beta, a
// limit rolled out in shadow mode (never denies, counts what it would
// have denied), and /metrics. The limiter is in process; with REDIS_URL
// set (such as redis://localhost:6379/0) the limits live in Redis.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	ratelimitprom "github.com/ratelimitgen/ratelimitgen/adapters/prometheus"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	flag.Parse()
	quietDialErrors()
	metrics := &limitmetrics.Metrics{}
	limiter, err := newLimiter(os.Getenv("REDIS_URL"), metrics)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving http://%s/hello, /beta and /metrics", *addr)
	srv := &http.Server{Addr: *addr, Handler: newHandler(ratelimitprom.Instrument(limiter), metrics), ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// newLimiter returns the in-process limiter, or a Redis one when url is
// set, that reports to hook.
func newLimiter(url string, hook ratelimit.Hook) (ratelimit.Limiter, error) {
	if url == "" {
		return ratelimit.NewMemory(ratelimit.WithHook(hook)), nil
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	// ClientOptions bounds what a request costs while Redis is down: one
	// short timeout, no retries, until the limiter's circuit breaker opens.
	limiter := redislimit.New(redis.NewClient(redislimit.ClientOptions(o)), ratelimit.WithHook(hook))
	// Say at start-up whether Redis can decide calls; if not, the service
	// runs on and each rule's onerror policy decides until it can (the
	// client's short timeouts bound the check).
	if err := limiter.HealthCheck(context.Background()); err != nil {
		log.Printf("WARNING: %v; calls follow their onerror policy until Redis answers", err)
	}
	return limiter, nil
}

// quietDialErrors stops go-redis from logging each failed dial to stderr:
// ratelimit_backend_errors_total counts the failures, and while Redis is
// down the limiter's breaker fails calls at once.
func quietDialErrors() {
	redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial"}))
}

var (
	helloRule = &ratelimit.Rule{Name: "hello", Limits: []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 5}}}
	betaRule  = &ratelimit.Rule{Name: "beta", Limits: []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 2}}, Shadow: true}
)

// newHandler serves the limited routes and, on /metrics, the counters of
// metrics, the limiter's hook, and the latency of the limiter's calls.
func newHandler(limiter *ratelimitprom.Limiter, metrics *limitmetrics.Metrics) http.Handler {
	registry := prometheus.NewRegistry()
	registry.MustRegister(ratelimitprom.NewCollector(metrics), limiter)
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") })
	mux := http.NewServeMux()
	mux.Handle("GET /hello", httplimit.Middleware(limiter, helloRule, httplimit.ClientIP())(hello))
	mux.Handle("GET /beta", httplimit.Middleware(limiter, betaRule, httplimit.ClientIP())(hello))
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	return mux
}
