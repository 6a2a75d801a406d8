package ratelimit

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// simAdmission is one admitted simCall of a traffic simulation: when, and how
// many units.
type simAdmission struct {
	at    time.Duration // since the simulation began
	units int64
}

// simCall is one simCall a simulation makes.
type simCall struct {
	at   time.Duration
	cost int64
}

// simulate runs calls (in time order) against one limit of alg on a
// memory limiter (whose decisions redislimit's scripts make too, as the
// differential tests check) and returns the admitted ones.
func simulate(t *testing.T, alg Algorithm, period time.Duration, threshold int64, calls []simCall) []simAdmission {
	t.Helper()
	clock := newManualClock()
	start := clock.Now()
	// Start on a window's edge, so the scenarios place calls by window.
	clock.Set(start.Truncate(period).Add(period))
	start = clock.Now()
	l := NewMemory(WithClock(clock))
	lim := []Limit{{Period: period, Threshold: threshold, Algorithm: alg}}
	var out []simAdmission
	for _, c := range calls {
		clock.Set(start.Add(c.at))
		d, err := l.Allow(context.Background(), Request{Name: "sim", Key: "k", Cost: c.cost, Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			out = append(out, simAdmission{c.at, c.cost})
		}
	}
	return out
}

// mostInAPeriod returns the most units admitted in any span of one
// period (a half-open span (t − period, t], as the sliding log counts).
func mostInAPeriod(adm []simAdmission, period time.Duration) int64 {
	var most, sum int64
	lo := 0
	for hi := range adm {
		sum += adm[hi].units
		for adm[lo].at <= adm[hi].at-period {
			sum -= adm[lo].units
			lo++
		}
		most = max(most, sum)
	}
	return most
}

// TestSlidingWindowError measures how far sliding_window admits beyond
// its threshold in one period, which docs/algorithms.md quotes: in the
// worst case (the previous window's units bunched at its end, then a
// burst at the start of the next) and on bursty traffic (tenants sending
// bursts of LLM calls of 100 to 2,000 tokens against 20,000 tokens a
// minute). It checks the bound the algorithm's doc states (2×threshold−1
// in one period), that the sliding log, measured alike, is exact, and that
// docs/algorithms.md quotes the figures measured here.
func TestSlidingWindowError(t *testing.T) {
	const threshold, period = 20000, time.Minute

	// Worst case: the threshold in unit calls at the last millisecond of
	// a window, then unit calls each millisecond of the next.
	var worst []simCall
	for range threshold {
		worst = append(worst, simCall{at: period - time.Millisecond, cost: 1})
	}
	for ms := range 60000 {
		worst = append(worst, simCall{at: period + time.Duration(ms)*time.Millisecond, cost: 1})
	}
	got := mostInAPeriod(simulate(t, SlidingWindow, period, threshold, worst), period)
	t.Logf("sliding_window, worst case: %d units in one period for a threshold of %d (%.1f%% over)", got, threshold, pct(got, threshold))
	if got > 2*threshold-1 {
		t.Errorf("worst case: %d units in one period, beyond the documented 2×threshold−1 = %d", got, 2*threshold-1)
	}
	if got < threshold*3/2 {
		t.Errorf("worst case: only %d units in one period: the scenario no longer finds the error the docs quote", got)
	}

	// Bursty traffic: 20 seeds of an hour each; every second, with
	// probability 1/8, a burst of 5 to 40 calls of 100 to 2,000 tokens,
	// spread over up to 200 ms.
	var worstLog, worstWindow int64
	var over float64
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 28))
		var calls []simCall
		for s := range 3600 {
			if rng.IntN(8) != 0 {
				continue
			}
			at := time.Duration(s) * time.Second
			for range 5 + rng.IntN(36) {
				calls = append(calls, simCall{at: at + time.Duration(rng.IntN(200))*time.Millisecond, cost: 100 + rng.Int64N(1901)})
			}
		}
		sortCalls(calls)
		logged := mostInAPeriod(simulate(t, SlidingLog, period, threshold, calls), period)
		windowed := mostInAPeriod(simulate(t, SlidingWindow, period, threshold, calls), period)
		if logged > threshold {
			t.Errorf("seed %d: the sliding log admitted %d units in one period, beyond its threshold %d", seed, logged, threshold)
		}
		worstLog, worstWindow = max(worstLog, logged), max(worstWindow, windowed)
		over += pct(windowed, threshold)
	}
	t.Logf("bursty traffic, 20 hours: sliding_window at most %d units in one period (%.1f%% over; each hour's worst period %.1f%% over on average), sliding_log at most %d",
		worstWindow, pct(worstWindow, threshold), over/20, worstLog)
	if worstWindow > 2*threshold-1 {
		t.Errorf("bursty traffic: %d units in one period, beyond the documented 2×threshold−1 = %d", worstWindow, 2*threshold-1)
	}
	doc, err := os.ReadFile("../docs/algorithms.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, figure := range []string{
		fmt.Sprintf("%s units in one minute (%.0f%% over)", thousands(got), pct(got, threshold)),
		fmt.Sprintf("%s units (%.0f%% over)", thousands(worstWindow), pct(worstWindow, threshold)),
		fmt.Sprintf("%.0f%% over on average", over/20),
	} {
		if !strings.Contains(string(doc), figure) {
			t.Errorf("docs/algorithms.md does not quote the measured %q", figure)
		}
	}
}

// thousands writes n with commas between its thousands: 36,782.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// pct returns how far got is over threshold, in percent.
func pct(got, threshold int64) float64 { return 100 * float64(got-threshold) / float64(threshold) }

// sortCalls sorts calls by time, keeping the order of calls at one time.
func sortCalls(calls []simCall) {
	slices.SortStableFunc(calls, func(a, b simCall) int { return cmp.Compare(a.at, b.at) })
}
