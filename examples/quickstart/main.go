// Quickstart shows ratelimitgen end to end: an annotated interface, the
// decorator generated for it (ratelimit_gen.go, made by go generate), and a
// loop of calls that are admitted until the limit is reached.
//
//	go run ./examples/quickstart
//
// uses the in-process limiter. With REDIS_URL set (such as
// redis://localhost:6379/0) the limit lives in Redis instead, and is shared
// by every process that uses it: run the program twice within ten seconds
// and the second run is limited from its first call.
package main

//go:generate go run github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// Greeter greets people.
type Greeter interface {
	// Greet returns a greeting for name. Each name gets at most three
	// greetings every ten seconds.
	//
	//ratelimit:period=10 threshold=3 key=name
	Greet(ctx context.Context, name string) (string, error)
}

// greeter is the Greeter being limited.
type greeter struct{}

func (greeter) Greet(_ context.Context, name string) (string, error) {
	return "Hello, " + name + "!", nil
}

func main() {
	quietDialErrors()
	limiter, backend, err := newLimiter(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("limiter: %s\n", backend)
	if err := demo(context.Background(), os.Stdout, limiter); err != nil {
		log.Fatal(err)
	}
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

// demo greets Ada five times and Grace once through the rate-limited
// Greeter, printing which calls were admitted and which were limited.
func demo(ctx context.Context, w io.Writer, limiter ratelimit.Limiter) error {
	g := NewGreeterWithRateLimit(greeter{}, limiter)
	names := []string{"Ada", "Ada", "Ada", "Ada", "Ada", "Grace"}
	for i, name := range names {
		greeting, err := g.Greet(ctx, name)
		var limited *ratelimit.LimitError
		switch {
		case errors.As(err, &limited):
			fmt.Fprintf(w, "call %d: Greet(%q) limited, retry after %v\n", i+1, name, limited.RetryAfter.Round(time.Millisecond))
		case err != nil:
			return err
		default:
			fmt.Fprintf(w, "call %d: Greet(%q) allowed: %s\n", i+1, name, greeting)
		}
	}
	return nil
}
