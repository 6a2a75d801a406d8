package chaos

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// HotConfig says what a hot-line run does: worker processes whose
// goroutines call one line (one key of one rule) as fast as they can,
// with the library's defaults (a rule without OnError, a limiter
// redislimit.New(client) without options, the client from the package's
// ClientOptions, FailoverOptions or ClusterOptions), while a fault is
// injected; one run per fault and algorithm.
type HotConfig struct {
	// Topology is "standalone", "cluster" or "sentinel".
	Topology string
	// Processes and Goroutines are the worker processes and the
	// goroutines calling in each (default 4 and 64); the burst fault has
	// its own (BurstProcesses, BurstGoroutines).
	Processes, Goroutines int
	// Limit is the line's threshold per HotPeriod (default HotLimit).
	Limit int64
	// Algorithms are the algorithms of the line, a run each; empty means
	// HotAlgorithms. The burst fault runs a fixed window only.
	Algorithms []ratelimit.Algorithm
	// Faults names the faults, in order; empty means HotFaults's.
	Faults []string
	// Short holds each fault for less time and settles less before it.
	Short bool
	// Log receives progress lines and the workers' logs; nil discards
	// them.
	Log io.Writer
}

// The hot line's defaults, and the burst fault's own line: BurstProcesses
// processes with BurstGoroutines goroutines between them calling a line
// of BurstLimit per BurstPeriod (a fixed window) for BurstHold.
const (
	HotLimit        = 2000
	HotPeriod       = time.Second
	BurstProcesses  = 3
	BurstGoroutines = 32
	BurstLimit      = 1000
	BurstPeriod     = 10 * time.Second
	BurstHold       = 12 * time.Second
)

// HotAlgorithms are the algorithms of a hot-line run unless
// HotConfig.Algorithms says otherwise.
var HotAlgorithms = []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog}

// HotFaults returns the faults a hot-line run on topology injects unless
// HotConfig.Faults says otherwise: "none" (load alone), the topology's
// outages and "burst" (see BurstProcesses). "none" and "burst" are faults
// of every topology; the others are the chaos run's (see Run).
func HotFaults(topology string) []string {
	switch topology {
	case "sentinel":
		return []string{"none", "SENTINEL FAILOVER", "primary killed", "burst"}
	case "cluster":
		// One line's key lives on one master, which "master SIGSTOP" (of
		// the first master) need not be: these faults hit every master.
		return []string{"none", "SIGSTOP", "kill+restart", "burst"}
	}
	return []string{"none", "SIGSTOP", "kill+restart", "burst"}
}

// HotResult is what the callers of one hot line saw under one fault.
type HotResult struct {
	Topology  string
	Fault     string
	Algorithm ratelimit.Algorithm
	// Policy is the error policy the calls were decided under: the
	// limiter's default, the rule having none.
	Policy ratelimit.ErrorPolicy
	Limit  int64
	Period time.Duration
	// Processes and Goroutines are the processes and the goroutines
	// calling, in all.
	Processes, Goroutines int
	// Calls, Denied and Errors count the calls made, denied by the limit,
	// and failed otherwise (FirstError the first such error).
	Calls, Denied, Errors int64
	FirstError            string
	// Admitted split by who decided: Redis, a fallback, or nobody (let
	// through undecided under FailOpen).
	ByRedis, ByFallback, Undecided int64
	// Windows are the worst windows of one Period: aligned on Unix time,
	// as a fixed window is, and sliding (any span of a Period).
	Windows windowFigures
	// FaultAdmitted is the number of calls admitted (whose decision
	// returned) from the fault's start to its heal, which took
	// FaultTime; for "none" and "burst", the load's time.
	FaultAdmitted int64
	FaultTime     time.Duration
	// Openings is the number of breaker openings in each process.
	Openings []int64
}

// Admitted returns the number of calls admitted, however decided.
func (r HotResult) Admitted() int64 { return r.ByRedis + r.ByFallback + r.Undecided }

// WorstRatio is the worst aligned window ÷ the limit.
func (r HotResult) WorstRatio() float64 { return float64(r.Windows.Worst) / float64(r.Limit) }

// SlidingRatio is the worst sliding window ÷ the limit.
func (r HotResult) SlidingRatio() float64 { return float64(r.Windows.Sliding) / float64(r.Limit) }

// FaultRatio is what was admitted per Period during the fault ÷ the limit
// (per second ÷ the limit, for a line of 1 s).
func (r HotResult) FaultRatio() float64 {
	if r.FaultTime <= 0 {
		return 0
	}
	perPeriod := float64(r.FaultAdmitted) * float64(r.Period) / float64(r.FaultTime)
	return perPeriod / float64(r.Limit)
}

// TotalOpenings returns the breaker openings of every process.
func (r HotResult) TotalOpenings() int64 {
	var n int64
	for _, o := range r.Openings {
		n += o
	}
	return n
}

// hotFault is a fault of a hot-line run: the load runs a moment, then
// the fault is injected and held for hold, healed, and the load runs
// after more. A fault that is the load alone ("none", "burst") is held
// from the load's start.
type hotFault struct {
	fault
	hold, after     time.Duration
	loadOnly, burst bool
}

// hotFaults returns the faults cfg names for topo, timed.
func hotFaults(topo topology, cfg HotConfig) ([]hotFault, error) {
	names := cfg.Faults
	if len(names) == 0 {
		names = HotFaults(cfg.Topology)
	}
	noop := func(context.Context) error { return nil }
	topoFaults := topo.faults()
	var out []hotFault
	for _, name := range names {
		f := hotFault{fault: fault{name: name, inject: noop, heal: noop}, loadOnly: true}
		switch name {
		case "none":
			f.hold = pick(cfg.Short, 2*time.Second, 8*time.Second)
		case "burst":
			f.hold, f.burst = pick(cfg.Short, 3*time.Second, BurstHold), true
		default:
			i := slices.IndexFunc(topoFaults, func(f fault) bool { return f.name == name })
			if i < 0 {
				return nil, fmt.Errorf("unknown fault %q for %s", name, cfg.Topology)
			}
			f.fault, f.loadOnly = topoFaults[i], false
			f.hold = pick(cfg.Short, time.Second, 3*time.Second)
			if strings.Contains(name, "kill") {
				f.hold = pick(cfg.Short, time.Second, 2*time.Second) // restarted 2 s later
			}
			f.after = pick(cfg.Short, time.Second, 2*time.Second)
		}
		out = append(out, f)
	}
	return out, nil
}

// pick returns short when it is, else long.
func pick(isShort bool, short, long time.Duration) time.Duration {
	if isShort {
		return short
	}
	return long
}

// HotTable writes results as a Markdown table, then the first error
// callers saw under each fault where they saw one. A window figure reads
// "certain–worst": the calls known to be in the window (their decision
// began and returned in it), then with the calls straddling its edges.
func HotTable(w io.Writer, results []HotResult) {
	fmt.Fprintln(w, "| topology | fault | algorithm | worst window ÷ limit | worst sliding window ÷ limit | admitted/s during fault ÷ limit | breaker openings | caller errors | calls denied | admitted by Redis / fallback / undecided | straddling | default policy |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range results {
		fault := r.Fault
		if r.Period != HotPeriod {
			fault = fmt.Sprintf("%s (%d per %s, %d×%d)", r.Fault, r.Limit, r.Period, r.Processes, r.Goroutines)
		}
		sliding := "-"
		if a, _ := limitfacts.Lookup(string(r.Algorithm)); a.State == limitfacts.Log {
			sliding = span(r.Windows.SlidingCertain, r.Windows.Sliding, r.Limit)
		}
		perSecond := 0.0
		if r.FaultTime > 0 {
			perSecond = float64(r.FaultAdmitted) / r.FaultTime.Seconds()
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s (%.0f/s) | %d (%s) | %d | %d | %d / %d / %d | %d | %s |\n",
			r.Topology, fault, r.Algorithm, span(r.Windows.Certain, r.Windows.Worst, r.Limit), sliding,
			ratio(r.FaultRatio()), perSecond, r.TotalOpenings(), joinInts(r.Openings), r.Errors, r.Denied,
			r.ByRedis, r.ByFallback, r.Undecided, r.Windows.Straddling, policyName(r.Policy))
	}
	first := true
	for _, r := range results {
		if r.FirstError != "" {
			if first {
				fmt.Fprintln(w)
				first = false
			}
			fmt.Fprintf(w, "%s, %s: first caller error: %s\n", r.Fault, r.Algorithm, r.FirstError)
		}
	}
}

// span formats a window's certain and worst counts ÷ limit, then the
// counts.
func span(certain, worst, limit int64) string {
	return fmt.Sprintf("%s–%s (%d–%d)", ratio(float64(certain)/float64(limit)), ratio(float64(worst)/float64(limit)), certain, worst)
}

// ratio formats a ratio with three significant digits or more.
func ratio(f float64) string {
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	}
	return fmt.Sprintf("%.3f", f)
}

// joinInts formats ns separated by commas.
func joinInts(ns []int64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
