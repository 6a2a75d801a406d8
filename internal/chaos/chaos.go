// Package chaos runs limiters sharing a real Redis under load while it
// injects faults into Redis, one at a time, and counts what the callers
// saw: how many calls each limit admitted in the window that spans the
// fault, against its limit and the bound the redislimit package documents,
// how many calls failed, and how long the limiters took to decide by Redis
// again. cmd/ratelimitchaos runs it; its test runs a short version.
//
// The "processes" are separate redislimit.Limiter instances in one OS
// process, each with its own client (connections, breaker, fallback and
// heartbeat member), as separate processes would have.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// Config says what a run does.
type Config struct {
	// Topology is "standalone", "cluster" or "sentinel".
	Topology string
	// Processes is the number of limiters sharing the Redis.
	Processes int
	// Goroutines is the number of goroutines calling each limiter.
	Goroutines int
	// Short holds each fault for less time and leaves less between them.
	Short bool
	// Faults names the faults to inject, in order; empty means all the
	// topology's.
	Faults []string
	// Algorithms are the algorithms of the limits; empty means
	// DefaultAlgorithms.
	Algorithms []ratelimit.Algorithm
	// Policies are the error policies of the rules; empty means
	// DefaultPolicies.
	Policies []ratelimit.ErrorPolicy
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// DefaultAlgorithms are the algorithms a run limits calls with unless
// Config.Algorithms says otherwise.
var DefaultAlgorithms = []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.TokenBucket, ratelimit.GCRA}

// DefaultPolicies are the error policies of a run's rules unless
// Config.Policies says otherwise.
var DefaultPolicies = []ratelimit.ErrorPolicy{ratelimit.FailLocal, ratelimit.FailOpen, ratelimit.FailClosed}

// Limit is the threshold of every limit, per Period.
const Limit = 100

// Period is the period of every limit: long enough that one window spans
// a fault and the calls around it (a fixed window is aligned on the
// clock, so a run that crosses midnight UTC sees two windows).
const Period = 24 * time.Hour

// Result is what the callers of one rule (an algorithm and a policy) saw
// around one fault. Its counts are of one window of the limit.
type Result struct {
	Fault     string
	Algorithm ratelimit.Algorithm
	Policy    ratelimit.ErrorPolicy
	Limit     int64
	Processes int
	// Calls is the number of calls made.
	Calls int64
	// Admitted is the number of calls admitted, however decided.
	Admitted int64
	// ByRedis, ByFallback and Undecided split Admitted: decided by Redis,
	// by a limiter's local fallback, or let through undecided (FailOpen).
	ByRedis, ByFallback, Undecided int64
	// RedisBeforeHeal is the number admitted by Redis before the fault
	// ended: what a fallback, or a Redis that lost its state, could not
	// know of.
	RedisBeforeHeal int64
	// Denied is the number of calls denied by a limit.
	Denied int64
	// Errors is the number of calls that failed otherwise (the caller
	// saw an error that is not ErrLimited).
	Errors int64
	// FirstError is the first such error, for the log.
	FirstError string
	// Recovery is how long after the fault ended every limiter decided a
	// call by Redis again; 0 when the fault did not stop Redis deciding.
	Recovery time.Duration
	// Recovered is false when some limiter never did (within a minute).
	Recovered bool
}

// Bound is the most the window may admit by the redislimit package doc
// (Outages): the limit, plus the calls Redis admitted that the fallbacks
// (or Redis, after losing its state) could not know of, plus under
// FailOpen the calls let through undecided.
func (r Result) Bound() int64 {
	return r.Limit + r.RedisBeforeHeal + r.Undecided
}

// Generous is the bound the short run asserts: the limit once per process
// (each fallback's share could be the whole limit if the heartbeat had
// counted one process) plus once for Redis, plus under FailOpen the calls
// let through undecided. It holds even when the heartbeat miscounts.
func (r Result) Generous() int64 {
	return r.Limit*int64(1+r.Processes) + r.Undecided
}

// fault is one fault: inject starts it, heal ends it.
type fault struct {
	name string
	// outage is whether Redis stops deciding calls while it lasts.
	outage       bool
	inject, heal func(ctx context.Context) error
}

// topology is the Redis the limiters share.
type topology interface {
	// client returns a new client for one limiter.
	client() redis.UniversalClient
	faults() []fault
	stop()
}

// counters are one rule's counts.
type counters struct {
	calls, byRedis, byFallback, undecided, redisBeforeHeal, denied, errors atomic.Int64
	firstError                                                             atomic.Pointer[string]
}

// Run starts the topology, runs every fault in turn and returns a result
// per fault, algorithm and policy.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Processes < 1 {
		cfg.Processes = 3
	}
	if cfg.Goroutines < 1 {
		cfg.Goroutines = 2
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultAlgorithms
	}
	if len(cfg.Policies) == 0 {
		cfg.Policies = DefaultPolicies
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	var topo topology
	var err error
	switch cfg.Topology {
	case "", "standalone":
		topo, err = startStandalone()
	case "sentinel":
		topo, err = startSentinel(ctx)
	case "cluster":
		topo, err = startCluster()
	default:
		return nil, fmt.Errorf("unknown topology %q: standalone, cluster or sentinel", cfg.Topology)
	}
	if err != nil {
		return nil, err
	}
	defer topo.stop()
	faults := topo.faults()
	if len(cfg.Faults) > 0 {
		var chosen []fault
		for _, name := range cfg.Faults {
			i := slices.IndexFunc(faults, func(f fault) bool { return f.name == name })
			if i < 0 {
				return nil, fmt.Errorf("unknown fault %q for %s", name, cfg.Topology)
			}
			chosen = append(chosen, faults[i])
		}
		faults = chosen
	}

	limiters := make([]*redislimit.Limiter, cfg.Processes)
	for i := range limiters {
		c := topo.client()
		defer c.Close()
		limiters[i] = redislimit.New(c)
	}
	hold, settle := 3*time.Second, 3*time.Second
	if cfg.Short {
		hold, settle = time.Second, 1500*time.Millisecond
	}
	var results []Result
	for _, f := range faults {
		// Let the heartbeat count every limiter (it beats once a second).
		time.Sleep(settle)
		logf("fault %s: start", f.name)
		rs, err := runFault(ctx, cfg, limiters, f, hold, logf)
		if err != nil {
			return results, fmt.Errorf("fault %s: %w", f.name, err)
		}
		results = append(results, rs...)
	}
	return results, nil
}

// runFault loads the limiters with calls of one rule per algorithm and
// policy, injects f, holds it, heals it and counts.
func runFault(ctx context.Context, cfg Config, limiters []*redislimit.Limiter, f fault, hold time.Duration, logf func(string, ...any)) ([]Result, error) {
	type row struct {
		rule *ratelimit.Rule
		c    *counters
	}
	var rows []row
	for _, alg := range cfg.Algorithms {
		for _, pol := range cfg.Policies {
			rows = append(rows, row{
				rule: &ratelimit.Rule{
					Name:    fmt.Sprintf("chaos.%s.%s.%s.%d", f.name, alg, pol, time.Now().UnixNano()),
					Limits:  []ratelimit.Limit{{Period: Period, Threshold: Limit, Algorithm: alg}},
					OnError: pol,
				},
				c: new(counters),
			})
		}
	}
	var healed atomic.Bool
	call := func(l *redislimit.Limiter, r row) {
		c := r.c
		c.calls.Add(1)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		a, err := r.rule.Admit(cctx, l, "k", 1)
		switch {
		case err == nil && !a.Decided:
			c.undecided.Add(1)
		case err == nil && a.Decision.Source == ratelimit.SourceFallback:
			c.byFallback.Add(1)
		case err == nil:
			c.byRedis.Add(1)
			if !healed.Load() {
				c.redisBeforeHeal.Add(1)
			}
		case errors.Is(err, ratelimit.ErrLimited):
			c.denied.Add(1)
		default:
			if c.errors.Add(1) == 1 {
				s := err.Error()
				c.firstError.Store(&s)
			}
		}
	}
	// Before the load, Redis admits one call of each rule per process.
	for _, l := range limiters {
		for _, r := range rows {
			call(l, r)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range limiters {
		for g := range cfg.Goroutines {
			wg.Go(func() {
				for i := g; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					call(l, rows[i%len(rows)])
					time.Sleep(2 * time.Millisecond)
				}
			})
		}
	}
	finish := func() {
		close(stop)
		wg.Wait()
	}
	time.Sleep(300 * time.Millisecond)
	if err := f.inject(ctx); err != nil {
		finish()
		return nil, fmt.Errorf("inject: %w", err)
	}
	logf("fault %s: injected", f.name)
	if f.outage {
		time.Sleep(hold)
	}
	if err := f.heal(ctx); err != nil {
		finish()
		return nil, fmt.Errorf("heal: %w", err)
	}
	healedAt := time.Now()
	healed.Store(true)
	logf("fault %s: healed", f.name)
	recovery, recovered := time.Duration(0), true
	if f.outage {
		recovery, recovered = awaitRedis(ctx, limiters, healedAt)
		logf("fault %s: every limiter decides by Redis again after %s (recovered: %v)", f.name, recovery.Round(time.Millisecond), recovered)
	}
	// Calls go on after the recovery, decided by Redis.
	time.Sleep(500 * time.Millisecond)
	finish()

	var out []Result
	for _, r := range rows {
		c := r.c
		res := Result{
			Fault: f.name, Algorithm: r.rule.Limits[0].Algorithm, Policy: r.rule.OnError,
			Limit: Limit, Processes: len(limiters),
			Calls: c.calls.Load(), ByRedis: c.byRedis.Load(), ByFallback: c.byFallback.Load(),
			Undecided: c.undecided.Load(), RedisBeforeHeal: c.redisBeforeHeal.Load(),
			Denied: c.denied.Load(), Errors: c.errors.Load(),
			Recovery: recovery, Recovered: recovered,
		}
		res.Admitted = res.ByRedis + res.ByFallback + res.Undecided
		if p := c.firstError.Load(); p != nil {
			res.FirstError = *p
		}
		out = append(out, res)
	}
	return out, nil
}

// awaitRedis makes calls of a rule no call exhausts on each limiter until
// Redis decides one, and returns how long after healedAt the last limiter
// did, and whether each did within a minute.
func awaitRedis(ctx context.Context, limiters []*redislimit.Limiter, healedAt time.Time) (time.Duration, bool) {
	rule := &ratelimit.Rule{Name: "chaos.await", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1 << 40}}, OnError: ratelimit.FailLocal}
	deadline := healedAt.Add(time.Minute)
	var last time.Duration
	for i, l := range limiters {
		for {
			a, err := rule.Admit(ctx, l, fmt.Sprint("await", i), 1)
			if err == nil && a.Decision.Source == ratelimit.SourceBackend {
				last = max(last, time.Since(healedAt))
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return time.Since(healedAt), false
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return last, true
}

// Table writes results as a Markdown table.
func Table(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| fault | algorithm | onerror | calls | admitted / limit | by Redis / fallback / undecided | doc bound | caller errors | recovery |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		rec := "-"
		switch {
		case !r.Recovered:
			rec = "never"
		case r.Recovery > 0:
			rec = r.Recovery.Round(time.Millisecond).String()
		}
		bound := fmt.Sprint(r.Bound())
		if r.Admitted > r.Bound() {
			bound += " **exceeded**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d / %d | %d / %d / %d | %s | %d | %s |\n",
			r.Fault, r.Algorithm, policyName(r.Policy), r.Calls, r.Admitted, r.Limit,
			r.ByRedis, r.ByFallback, r.Undecided, bound, r.Errors, rec)
	}
}

func policyName(p ratelimit.ErrorPolicy) string {
	return strings.TrimSpace(string(p))
}
