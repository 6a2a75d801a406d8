// Package chaos runs limiters sharing a real Redis under load while it
// injects faults into Redis, one at a time, and counts what the callers
// saw: how many calls each limit admitted in the window that spans the
// fault, against its limit and the bound the redislimit package documents,
// how many calls failed, and how long the limiters took to decide by Redis
// again. cmd/ratelimitchaos runs it; its test runs a short version.
// [RunHot] loads one hot line instead, as fast as its callers can, with
// the library's default options, and measures its worst windows against
// the limit (cmd/ratelimitchaos -hot).
//
// The processes are OS processes: the run starts its own executable
// again as workers (see [WorkerMain]), each with one redislimit.Limiter
// and one client of its own, tells them what to call and when, and adds
// up what each counted.
package chaos

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Config says what a run does.
type Config struct {
	// Topology is "standalone", "cluster" or "sentinel".
	Topology string
	// Processes is the number of worker processes sharing the Redis, one
	// limiter each.
	Processes int
	// Goroutines is the number of goroutines calling in each process.
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
	// Log receives progress lines, and the workers' standard error (their
	// limiters' logs); nil discards them.
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
	// endpoint says how a worker's client reaches it.
	endpoint() endpoint
	faults() []fault
	// ready waits until the topology is whole again after a fault: every
	// node it has up and in sync.
	ready(ctx context.Context) error
	stop()
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
	logf := logger(cfg.Log)
	topo, err := startTopology(ctx, cfg.Topology, logf)
	if err != nil {
		return nil, err
	}
	defer topo.stop()
	faults, err := choose(topo.faults(), cfg)
	if err != nil {
		return nil, err
	}

	procs := make([]*process, 0, cfg.Processes)
	defer func() {
		for _, p := range procs {
			p.close()
		}
	}()
	for range cfg.Processes {
		p, err := startProcess(topo.endpoint(), cfg.Goroutines, cfg.Log)
		if err != nil {
			return nil, fmt.Errorf("starting a worker process: %w", err)
		}
		procs = append(procs, p)
	}
	hold, settle := 3*time.Second, 3*time.Second
	if cfg.Short {
		hold, settle = time.Second, 1500*time.Millisecond
	}
	var results []Result
	for _, f := range faults {
		if err := topo.ready(ctx); err != nil {
			return results, fmt.Errorf("before fault %s: %w", f.name, err)
		}
		// Let the heartbeat count every process (it beats once a second).
		time.Sleep(settle)
		logf("fault %s: start", f.name)
		rs, err := runFault(ctx, cfg, procs, f, hold, logf)
		if err != nil {
			return results, fmt.Errorf("fault %s: %w", f.name, err)
		}
		results = append(results, rs...)
	}
	return results, nil
}

// logger returns a function that writes a progress line, with the time,
// to w (nil discards it).
func logger(w io.Writer) func(string, ...any) {
	if w == nil {
		w = io.Discard
	}
	return func(format string, args ...any) {
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

// startTopology starts the Redis of the named topology: "standalone" (or
// ""), "sentinel" or "cluster".
func startTopology(ctx context.Context, name string, logf func(string, ...any)) (topology, error) {
	var topo topology
	var err error
	switch name {
	case "", "standalone":
		topo, err = startStandalone()
	case "sentinel":
		topo, err = startSentinel(ctx, logf)
	case "cluster":
		topo, err = startCluster()
	default:
		err = fmt.Errorf("unknown topology %q: standalone, cluster or sentinel", name)
	}
	if err != nil {
		return nil, err
	}
	return topo, nil
}

// choose returns the faults cfg names, in its order, or all when it names
// none.
func choose(faults []fault, cfg Config) ([]fault, error) {
	if len(cfg.Faults) == 0 {
		return faults, nil
	}
	var chosen []fault
	for _, name := range cfg.Faults {
		i := slices.IndexFunc(faults, func(f fault) bool { return f.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown fault %q for %s", name, cfg.Topology)
		}
		chosen = append(chosen, faults[i])
	}
	return chosen, nil
}

// runFault loads the processes with calls of one rule per algorithm and
// policy, injects f, holds it, heals it and adds up the processes' counts.
func runFault(ctx context.Context, cfg Config, procs []*process, f fault, hold time.Duration, logf func(string, ...any)) ([]Result, error) {
	var specs []ruleSpec
	for _, alg := range cfg.Algorithms {
		for _, pol := range cfg.Policies {
			specs = append(specs, ruleSpec{
				Name:      fmt.Sprintf("chaos.%s.%s.%s.%d", f.name, alg, pol, time.Now().UnixNano()),
				Algorithm: alg, Policy: pol,
			})
		}
	}
	if _, err := askAll(procs, message{Op: "start", Rules: specs}, "started"); err != nil {
		return nil, err
	}
	stopped := false
	stop := func() ([]message, error) {
		stopped = true
		return askAll(procs, message{Op: "stop"}, "counts")
	}
	defer func() {
		if !stopped {
			_, _ = stop()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := f.inject(ctx); err != nil {
		return nil, fmt.Errorf("inject: %w", err)
	}
	logf("fault %s: injected", f.name)
	if f.outage {
		time.Sleep(hold)
	}
	if err := f.heal(ctx); err != nil {
		return nil, fmt.Errorf("heal: %w", err)
	}
	healedAt := time.Now()
	if _, err := askAll(procs, message{Op: "healed"}, "healed"); err != nil {
		return nil, err
	}
	logf("fault %s: healed", f.name)
	recovery, recovered := time.Duration(0), true
	if f.outage {
		answers, err := askAll(procs, message{Op: "await"}, "decided")
		if err != nil {
			return nil, err
		}
		recovery = time.Since(healedAt)
		for _, a := range answers {
			recovered = recovered && a.Recovered
		}
		logf("fault %s: every process decides by Redis again after %s (recovered: %v)", f.name, recovery.Round(time.Millisecond), recovered)
	}
	// Calls go on after the recovery, decided by Redis.
	time.Sleep(500 * time.Millisecond)
	answers, err := stop()
	if err != nil {
		return nil, err
	}

	var out []Result
	for i, s := range specs {
		res := Result{
			Fault: f.name, Algorithm: s.Algorithm, Policy: s.Policy,
			Limit: Limit, Processes: len(procs),
			Recovery: recovery, Recovered: recovered,
		}
		for _, a := range answers {
			if len(a.Counts) != len(specs) {
				return nil, fmt.Errorf("a worker counted %d rules, not %d", len(a.Counts), len(specs))
			}
			res.add(a.Counts[i])
		}
		res.Admitted = res.ByRedis + res.ByFallback + res.Undecided
		out = append(out, res)
	}
	return out, nil
}

// add adds one process's counts to r.
func (r *Result) add(c Counts) {
	r.Calls += c.Calls
	r.ByRedis += c.ByRedis
	r.ByFallback += c.ByFallback
	r.Undecided += c.Undecided
	r.RedisBeforeHeal += c.RedisBeforeHeal
	r.Denied += c.Denied
	r.Errors += c.Errors
	if r.FirstError == "" {
		r.FirstError = c.FirstError
	}
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
