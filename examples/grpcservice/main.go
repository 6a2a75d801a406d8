// Grpcservice serves a protoc-generated gRPC service whose methods are
// limited per caller by a decorator that ratelimitgen generated
// (ratelimit_gen.go, made by go generate), with the adapters/grpc
// interceptors turning denials into the statuses gRPC clients expect. It
// is a module of its own so that the core module depends on no gRPC.
//
//	cd examples/grpcservice && go run . [-addr 127.0.0.1:50051]
//
// serves quotes.Quotes: Get, 3 calls per 10 s per caller, and List, a
// server stream, 1 per minute per caller; the caller is named by the
// x-user metadata field. With -demo it serves on a free loopback port
// instead, calls itself as a client until it is denied and prints what the
// client sees. The limiter is in process; with REDIS_URL set (such as
// redis://localhost:6379/0) the limits live in Redis and are shared by
// every process that serves the service.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

func main() {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:50051"), "address to listen on (default from $ADDR)")
	demo := flag.Bool("demo", false, "serve on a free loopback port, call the service until it denies, print what the client sees")
	flag.Parse()
	quietDialErrors()
	limiter, backend, err := newLimiter(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if *demo {
		*addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := newServer(limiter)
	if !*demo {
		log.Printf("serving quotes.Quotes on %s, limiter: %s", lis.Addr(), backend)
		log.Fatal(srv.Serve(lis))
	}
	go srv.Serve(lis)
	defer srv.Stop()
	fmt.Printf("limiter: %s\n", backend)
	if err := runDemo(context.Background(), os.Stdout, lis.Addr().String()); err != nil {
		log.Fatal(err)
	}
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// newLimiter returns the in-process limiter, or a Redis one when url is
// set, and says which.
func newLimiter(url string) (ratelimit.Limiter, string, error) {
	if url == "" {
		return ratelimit.NewMemory(), "in-process memory", nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", fmt.Errorf("REDIS_URL: %w", err)
	}
	// ClientOptions bounds what a call costs while Redis is down: one short
	// timeout, no retries, until the limiter's circuit breaker opens.
	limiter := redislimit.New(redis.NewClient(redislimit.ClientOptions(opts)))
	// Say at start-up whether Redis can decide calls; if not, the service
	// runs on and each rule's onerror policy decides until it can (the
	// client's short timeouts bound the check).
	if err := limiter.HealthCheck(context.Background()); err != nil {
		log.Printf("WARNING: %v; calls follow their onerror policy until Redis answers", err)
	}
	return limiter, "Redis at " + opts.Addr, nil
}

// quietDialErrors stops go-redis from logging each failed dial to stderr:
// while Redis is down the limiter fails calls at once (the rule's onerror
// policy applies) and a hook such as ratelimit.NewSlogHook reports the
// outage once.
func quietDialErrors() {
	redis.SetLogger(logging.NewBlacklistLogger([]string{"failed to dial"}))
}
