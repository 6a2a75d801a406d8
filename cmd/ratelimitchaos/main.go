// Command ratelimitchaos starts real Redis servers on loopback, runs
// worker processes (this command started again, each an OS process with a
// limiter and client of its own) sharing them under load while it injects
// faults one at a time, and prints a Markdown table per fault, algorithm and error policy: the
// calls admitted in the window spanning the fault against the limit and
// the bound the redislimit package documents, the errors callers saw and
// the time until every limiter decided by Redis again.
//
//	go run ./cmd/ratelimitchaos -topology standalone
//
// It needs redis-server, redis-cli and redis-sentinel on PATH.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/chaos"
)

type discard struct{}

func (discard) Printf(context.Context, string, ...any) {}

func main() {
	chaos.WorkerMain() // when this is a worker process of a run
	var cfg chaos.Config
	flag.StringVar(&cfg.Topology, "topology", "standalone", "standalone, cluster or sentinel")
	flag.IntVar(&cfg.Processes, "processes", 3, "worker processes sharing the Redis, each an OS process with one limiter and client")
	flag.IntVar(&cfg.Goroutines, "goroutines", 2, "goroutines calling in each process")
	flag.BoolVar(&cfg.Short, "short", false, "hold each fault 1s instead of 3s")
	faults := flag.String("faults", "", "comma-separated faults to inject (default: all of the topology's)")
	quiet := flag.Bool("q", false, "print only the table")
	flag.Parse()
	if *faults != "" {
		cfg.Faults = strings.Split(*faults, ",")
	}
	if *quiet {
		// The limiters log their breakers, go-redis its failed dials.
		redis.SetLogger(discard{})
		slog.SetDefault(slog.New(slog.DiscardHandler))
	} else {
		cfg.Log = os.Stderr
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	results, err := chaos.Run(ctx, cfg)
	fmt.Printf("topology %s, %d processes × %d goroutines, limit %d per %s\n\n", cfg.Topology, cfg.Processes, cfg.Goroutines, chaos.Limit, chaos.Period)
	chaos.Table(os.Stdout, results)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratelimitchaos:", err)
		os.Exit(1)
	}
}
