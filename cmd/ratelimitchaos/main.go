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
// With -hot it loads one hot line instead (4 processes × 64 goroutines
// calling one key of a 2,000/s limit as fast as they can, with the
// library's default options) through each fault, and prints the worst
// 1 s window ÷ the limit, what was admitted per second during the fault ÷
// the limit, the breaker openings and the errors callers saw:
//
//	go run ./cmd/ratelimitchaos -hot
//	go run ./cmd/ratelimitchaos -topology cluster -hot -faults none
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
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

type discard struct{}

func (discard) Printf(context.Context, string, ...any) {}

// flags are the command's flags.
type flags struct {
	cfg        chaos.Config
	hot        bool
	limit      int64
	faults     string
	algorithms string
	quiet      bool
}

func main() {
	chaos.WorkerMain() // when this is a worker process of a run
	f := parseFlags()
	if f.quiet {
		// The limiters log their breakers, go-redis its failed dials.
		redis.SetLogger(discard{})
		slog.SetDefault(slog.New(slog.DiscardHandler))
	} else {
		f.cfg.Log = os.Stderr
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var err error
	if f.hot {
		err = runHot(ctx, f)
	} else {
		err = run(ctx, f.cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratelimitchaos:", err)
		os.Exit(1)
	}
}

// parseFlags parses the command line; with -hot, -processes and
// -goroutines default to 4 and 64.
func parseFlags() flags {
	var f flags
	flag.StringVar(&f.cfg.Topology, "topology", "standalone", "standalone, cluster or sentinel")
	flag.IntVar(&f.cfg.Processes, "processes", 3, "worker processes sharing the Redis, each an OS process with one limiter and client (-hot: 4)")
	flag.IntVar(&f.cfg.Goroutines, "goroutines", 2, "goroutines calling in each process (-hot: 64)")
	flag.BoolVar(&f.cfg.Short, "short", false, "hold each fault 1s instead of 3s (-hot: and load 2s, not 8s, without a fault)")
	flag.BoolVar(&f.hot, "hot", false, "load one hot line as fast as the goroutines can, with the library's defaults, through each fault")
	flag.Int64Var(&f.limit, "limit", chaos.HotLimit, "-hot: the line's limit per second")
	flag.StringVar(&f.faults, "faults", "", "comma-separated faults to inject (default: all of the topology's; -hot: none, its outages, burst)")
	flag.StringVar(&f.algorithms, "algorithms", "", "comma-separated algorithms (default: all; -hot: fixed_window,sliding_log; token_bucket and gcra may be added)")
	flag.BoolVar(&f.quiet, "q", false, "print only the table")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.hot && !set["processes"] {
		f.cfg.Processes = 4
	}
	if f.hot && !set["goroutines"] {
		f.cfg.Goroutines = 64
	}
	if f.faults != "" {
		f.cfg.Faults = strings.Split(f.faults, ",")
	}
	if f.algorithms != "" {
		for _, a := range strings.Split(f.algorithms, ",") {
			f.cfg.Algorithms = append(f.cfg.Algorithms, ratelimit.Algorithm(a))
		}
	}
	return f
}

// run runs the chaos run of cfg and prints its table.
func run(ctx context.Context, cfg chaos.Config) error {
	results, err := chaos.Run(ctx, cfg)
	fmt.Printf("topology %s, %d processes × %d goroutines, limit %d per %s\n\n", cfg.Topology, cfg.Processes, cfg.Goroutines, chaos.Limit, chaos.Period)
	chaos.Table(os.Stdout, results)
	return err
}

// runHot runs the hot-line run of f and prints its table.
func runHot(ctx context.Context, f flags) error {
	cfg := chaos.HotConfig{
		Topology: f.cfg.Topology, Processes: f.cfg.Processes, Goroutines: f.cfg.Goroutines,
		Limit: f.limit, Algorithms: f.cfg.Algorithms, Faults: f.cfg.Faults, Short: f.cfg.Short, Log: f.cfg.Log,
	}
	results, err := chaos.RunHot(ctx, cfg)
	fmt.Printf("topology %s, hot line: %d processes × %d goroutines calling one key of %d per %s as fast as they can, library defaults\n\n",
		cfg.Topology, cfg.Processes, cfg.Goroutines, cfg.Limit, chaos.HotPeriod)
	chaos.HotTable(os.Stdout, results)
	return err
}
