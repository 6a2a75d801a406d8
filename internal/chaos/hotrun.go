package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// RunHot starts the topology and, for each fault in turn and each
// algorithm, loads a fresh hot line (a rule of a new name, fresh worker
// processes) through the fault, and returns what its callers saw.
func RunHot(ctx context.Context, cfg HotConfig) ([]HotResult, error) {
	if cfg.Processes < 1 {
		cfg.Processes = 4
	}
	if cfg.Goroutines < 1 {
		cfg.Goroutines = 64
	}
	if cfg.Limit < 1 {
		cfg.Limit = HotLimit
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = HotAlgorithms
	}
	if cfg.Topology == "" {
		cfg.Topology = "standalone"
	}
	logf := logger(cfg.Log)
	topo, err := startTopology(ctx, cfg.Topology, logf)
	if err != nil {
		return nil, err
	}
	defer topo.stop()
	faults, err := hotFaults(topo, cfg)
	if err != nil {
		return nil, err
	}
	var results []HotResult
	for _, f := range faults {
		algs := cfg.Algorithms
		if f.burst {
			algs = []ratelimit.Algorithm{ratelimit.FixedWindow}
		}
		for _, alg := range algs {
			if err := ctx.Err(); err != nil {
				return results, err
			}
			if err := topo.ready(ctx); err != nil {
				return results, fmt.Errorf("before fault %s: %w", f.name, err)
			}
			r, err := runHotLine(ctx, cfg, topo, f, alg, logf)
			if err != nil {
				return results, fmt.Errorf("fault %s, %s: %w", f.name, alg, err)
			}
			results = append(results, r)
		}
	}
	return results, nil
}

// hotEndpoint says how the workers reach topo: directly where it can say
// so, as a hot line's clients would.
func hotEndpoint(topo topology) endpoint {
	if d, ok := topo.(interface{ direct() endpoint }); ok {
		return d.direct()
	}
	return topo.endpoint()
}

// runHotLine starts the worker processes of one hot line, lets their
// heartbeats count them, loads the line through f and adds up what the
// processes' callers saw.
func runHotLine(ctx context.Context, cfg HotConfig, topo topology, f hotFault, alg ratelimit.Algorithm, logf func(string, ...any)) (HotResult, error) {
	r := HotResult{Topology: cfg.Topology, Fault: f.name, Algorithm: alg, Limit: cfg.Limit, Period: HotPeriod}
	goroutines := spread(cfg.Goroutines*cfg.Processes, cfg.Processes)
	if f.burst {
		r.Limit, r.Period = BurstLimit, BurstPeriod
		goroutines = spread(BurstGoroutines, BurstProcesses)
	}
	r.Processes, r.Goroutines = len(goroutines), sum(goroutines)
	procs := make([]*process, 0, len(goroutines))
	defer func() {
		for _, p := range procs {
			p.close()
		}
	}()
	for range goroutines {
		p, err := startProcess(hotEndpoint(topo), 1, cfg.Log)
		if err != nil {
			return r, fmt.Errorf("starting a worker process: %w", err)
		}
		procs = append(procs, p)
	}
	// Let the heartbeat count every process (it beats once a second).
	time.Sleep(pick(cfg.Short, 1500*time.Millisecond, 3*time.Second))
	periodMs := r.Period.Milliseconds()
	base := time.Now().UnixMilli()
	base -= base % periodMs
	spec := hotSpec{
		Name:      fmt.Sprintf("hot.%s.%s.%d", strings.ReplaceAll(f.name, " ", "_"), alg, time.Now().UnixNano()),
		Algorithm: alg, Limit: r.Limit, Period: r.Period, Base: base,
	}
	logf("hot %s, %s: %d processes, %d goroutines, %d per %s", f.name, alg, r.Processes, r.Goroutines, r.Limit, r.Period)
	started := time.Now()
	if _, err := askEach(procs, func(i int) message {
		s := spec
		s.Goroutines = goroutines[i]
		return message{Op: "hot", Hot: &s}
	}, "started"); err != nil {
		return r, err
	}
	counts, from, to, err := loadThrough(ctx, procs, f, started, logf)
	if err != nil {
		return r, err
	}
	r.add(counts, base, from, to)
	return r, nil
}

// add adds the processes' counts (their timelines from base) to r, and
// computes r's windows and what was admitted from the fault's start,
// from, to its heal, to.
func (r *HotResult) add(counts []HotCounts, base int64, from, to time.Time) {
	var begin, end []int64
	by := [nSources]*int64{byRedis: &r.ByRedis, byFallback: &r.ByFallback, undecided: &r.Undecided}
	for _, n := range counts {
		r.Calls, r.Denied, r.Errors = r.Calls+n.Calls, r.Denied+n.Denied, r.Errors+n.Errors
		if r.FirstError == "" {
			r.FirstError = n.FirstError
		}
		r.Openings = append(r.Openings, n.Openings)
		r.Policy = n.Policy
		for s := range nSources {
			n.Begin[s].addTo(&begin)
			n.End[s].addTo(&end)
			for _, c := range n.End[s].Counts {
				*by[s] += c
			}
		}
	}
	t := newTimeline(base, begin, end)
	r.Windows = t.windows(int(r.Period.Milliseconds()))
	r.FaultAdmitted = t.returned(from.UnixMilli(), to.UnixMilli())
	r.FaultTime = time.Duration(to.UnixMilli()-from.UnixMilli()) * time.Millisecond
}

// loadThrough lets the load, started at started, run, injects f, holds
// it, heals it, lets the load run on and stops it: it returns the
// processes' counts and when the fault began (the load's start for a
// fault that is the load alone) and was healed. The load stops even if
// the fault fails.
func loadThrough(ctx context.Context, procs []*process, f hotFault, started time.Time, logf func(string, ...any)) ([]HotCounts, time.Time, time.Time, error) {
	from := started
	if !f.loadOnly {
		time.Sleep(500 * time.Millisecond)
		from = time.Now()
	}
	err := f.inject(ctx)
	to := from
	if err == nil {
		logf("hot %s: injected", f.name)
		time.Sleep(f.hold)
		err = f.heal(ctx)
		to = time.Now()
		logf("hot %s: healed", f.name)
		time.Sleep(f.after)
	}
	answers, stopErr := askAll(procs, message{Op: "hotstop"}, "hotcounts")
	if err := errors.Join(err, stopErr); err != nil {
		return nil, from, to, err
	}
	counts := make([]HotCounts, len(answers))
	for i, a := range answers {
		counts[i] = *a.HotCounts
	}
	return counts, from, to, nil
}

// spread returns n goroutines spread over procs processes, as evenly as
// they go.
func spread(n, procs int) []int {
	out := make([]int, procs)
	for i := range out {
		out[i] = n / procs
		if i < n%procs {
			out[i]++
		}
	}
	return out
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}
