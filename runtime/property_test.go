package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// admission is one admitted call of a property test, times in µs since the
// test's start.
type admission struct {
	at, cost, delay int64
}

// arrivals decides n calls with random arrival times (bursts in one
// microsecond, quick runs and pauses of several periods) and random costs
// up to maxCost on the in-process backend, and returns those admitted.
func arrivals(t *testing.T, seed uint64, lim Limit, n int, maxCost int64) []admission {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	clock := newManualClock()
	start := clock.Now()
	l := NewMemory(WithClock(clock))
	period := lim.Period.Microseconds()
	var out []admission
	for range n {
		switch r := rng.IntN(100); {
		case r < 30: // same microsecond
		case r < 80:
			clock.Advance(time.Duration(rng.Int64N(period/lim.Threshold*2+2)) * us)
		case r < 97:
			clock.Advance(time.Duration(rng.Int64N(period+1)) * us)
		default:
			clock.Advance(time.Duration(rng.Int64N(3*period+1)) * us)
		}
		cost := 1 + rng.Int64N(maxCost)
		d := allow(t, l, Request{Name: "prop", Cost: cost, Limits: []Limit{lim}})
		if d.Allowed {
			out = append(out, admission{at: clock.Now().Sub(start).Microseconds(), cost: cost, delay: d.Delay.Microseconds()})
		}
	}
	require.NotEmpty(t, out)
	return out
}

// saturate calls every step µs for span µs with unit costs and returns how
// many were admitted: a limiter must not be stricter than its rate.
func saturate(t *testing.T, lim Limit, step, span int64) int64 {
	t.Helper()
	clock := newManualClock()
	l := NewMemory(WithClock(clock))
	admitted := int64(0)
	for at := int64(0); at < span; at += step {
		if allow(t, l, Request{Name: "sat", Limits: []Limit{lim}}).Allowed {
			admitted++
		}
		clock.Advance(time.Duration(step) * us)
	}
	return admitted
}

// windowSums returns, for each admission, the units admitted in (at-span, at].
func windowSums(adm []admission, span int64) []int64 {
	sums := make([]int64, len(adm))
	lo, sum := 0, int64(0)
	for i, a := range adm {
		sum += a.cost
		for adm[lo].at <= a.at-span {
			sum -= adm[lo].cost
			lo++
		}
		sums[i] = sum
	}
	return sums
}

func propertyLimits(alg Algorithm) []Limit {
	tiny := 13 * us
	if alg == FixedWindow || alg == SlidingWindow { // whole milliseconds
		tiny = 13 * time.Millisecond
	}
	return []Limit{
		{Algorithm: alg, Period: time.Second, Threshold: 10},
		{Algorithm: alg, Period: 70 * time.Millisecond, Threshold: 7},
		{Algorithm: alg, Period: tiny, Threshold: 3},
		{Algorithm: alg, Period: time.Minute, Threshold: 100},
	}
}

func TestPropertySlidingLogNeverExceedsThresholdInAnyWindow(t *testing.T) {
	for _, lim := range propertyLimits(SlidingLog) {
		t.Run(lim.String(), func(t *testing.T) {
			for seed := range uint64(3) {
				adm := arrivals(t, seed, lim, 3000, min(3, lim.Threshold))
				for i, sum := range windowSums(adm, lim.Period.Microseconds()) {
					if sum > lim.Threshold {
						t.Fatalf("%d units in the window ending at admission %d (%d µs)", sum, i, adm[i].at)
					}
				}
			}
			p := lim.Period.Microseconds()
			got := saturate(t, lim, max(1, p/lim.Threshold/3), 20*p)
			require.InDelta(t, 20*lim.Threshold, got, float64(lim.Threshold), "a threshold per period, less the arrival grid's lag")
		})
	}
}

func TestPropertyFixedWindowAtMostThresholdPerAlignedWindow(t *testing.T) {
	for _, lim := range propertyLimits(FixedWindow) {
		t.Run(lim.String(), func(t *testing.T) {
			p := lim.Period.Microseconds()
			start := newManualClock().Now().UnixMicro()
			for seed := range uint64(3) {
				adm := arrivals(t, seed, lim, 3000, min(3, lim.Threshold))
				perWindow := map[int64]int64{}
				for _, a := range adm {
					w := (start + a.at) / p
					perWindow[w] += a.cost
					if perWindow[w] > lim.Threshold {
						t.Fatalf("%d units in window %d", perWindow[w], w)
					}
				}
				for i, sum := range windowSums(adm, p) {
					if sum > 2*lim.Threshold {
						t.Fatalf("%d units in the period ending at admission %d", sum, i)
					}
				}
			}
			got := saturate(t, lim, max(1, p/lim.Threshold/3), 20*p)
			require.InDelta(t, 20*lim.Threshold, got, float64(lim.Threshold), "a threshold per aligned window")
		})
	}
}

// TestPropertySlidingWindowStaysWithinItsBound checks, from the admissions
// alone, the documented bounds: at each admission the estimate
// prev×(period−elapsed)/period + cur is at most the threshold (which is
// the algorithm's definition), every aligned window holds at most the
// threshold, and every window of one period at most 2×threshold−1.
func TestPropertySlidingWindowStaysWithinItsBound(t *testing.T) {
	for _, lim := range propertyLimits(SlidingWindow) {
		t.Run(lim.String(), func(t *testing.T) {
			p := lim.Period.Microseconds()
			start := newManualClock().Now().UnixMicro()
			for seed := range uint64(3) {
				adm := arrivals(t, seed, lim, 3000, min(3, lim.Threshold))
				perWindow := map[int64]int64{}
				for i, a := range adm {
					now := start + a.at
					w := now / p
					perWindow[w] += a.cost
					cur, prev := perWindow[w], perWindow[w-1]
					elapsed := now - w*p
					if cur*p+prev*(p-elapsed) > lim.Threshold*p {
						t.Fatalf("admission %d: %d in this window, %d in the last, %dµs in", i, cur, prev, elapsed)
					}
				}
				for i, sum := range windowSums(adm, p) {
					if sum > 2*lim.Threshold-1 {
						t.Fatalf("%d units in the period ending at admission %d", sum, i)
					}
				}
			}
			// Under a steady overload a window's count ends near the
			// threshold, so the next starts weighing almost a threshold
			// and the approximation admits less than the rate.
			got := saturate(t, lim, max(1, p/lim.Threshold/3), 20*p)
			require.GreaterOrEqual(t, got, 20*lim.Threshold*2/3, "most of a threshold per period")
			require.LessOrEqual(t, got, 21*lim.Threshold, "the span touches 21 windows")
		})
	}
}

// TestPropertyBucketsNeverExceedBurstPlusRate checks that token_bucket and
// gcra admit at most burst + threshold×t/period units in any span t (from
// one admission to another, both included), for bursts above, at and below
// the threshold.
func TestPropertyBucketsNeverExceedBurstPlusRate(t *testing.T) {
	for _, alg := range []Algorithm{TokenBucket, GCRA} {
		lims := propertyLimits(alg)
		lims = append(lims,
			Limit{Algorithm: alg, Period: time.Second, Threshold: 7, Burst: 20},
			Limit{Algorithm: alg, Period: 30 * time.Millisecond, Threshold: 9, Burst: 2},
		)
		for _, lim := range lims {
			t.Run(fmt.Sprintf("%s burst %d", lim, lim.MaxCost()), func(t *testing.T) {
				p, burst := lim.Period.Microseconds(), lim.MaxCost()
				for seed := range uint64(3) {
					adm := arrivals(t, seed, lim, 2000, min(3, burst))
					for i := range adm {
						units := int64(0)
						for j := i; j < len(adm); j++ {
							units += adm[j].cost
							if units*p > burst*p+(adm[j].at-adm[i].at)*lim.Threshold {
								t.Fatalf("%d units from %dµs to %dµs", units, adm[i].at, adm[j].at)
							}
						}
					}
				}
				got := saturate(t, lim, max(1, p/lim.Threshold/3), 20*p)
				require.InDelta(t, 20*lim.Threshold+burst, got, 2, "burst, then the rate")
			})
		}
	}
}

// TestPropertyLeakyBucketPacesAndBoundsItsQueue checks that admitted
// calls leave (arrival + Delay) at least period/threshold per unit apart,
// to the microsecond the delays are rounded up to, and that no admission
// finds more than capacity units queued with it.
func TestPropertyLeakyBucketPacesAndBoundsItsQueue(t *testing.T) {
	lims := propertyLimits(LeakyBucket)
	lims = append(lims,
		Limit{Algorithm: LeakyBucket, Period: time.Second, Threshold: 4, Capacity: 12},
		Limit{Algorithm: LeakyBucket, Period: 30 * time.Millisecond, Threshold: 9, Capacity: 2},
	)
	for _, lim := range lims {
		t.Run(fmt.Sprintf("%s capacity %d", lim, lim.MaxCost()), func(t *testing.T) {
			p, capacity := lim.Period.Microseconds(), lim.MaxCost()
			exact := p%lim.Threshold == 0 // whole-µs departures
			for seed := range uint64(3) {
				adm := arrivals(t, seed, lim, 3000, min(3, capacity))
				for i := 1; i < len(adm); i++ {
					prev, cur := adm[i-1], adm[i]
					gap := (cur.at + cur.delay) - (prev.at + prev.delay)
					if exact && gap*lim.Threshold < prev.cost*p || (gap+1)*lim.Threshold <= prev.cost*p {
						t.Fatalf("departures %d and %d only %dµs apart", i-1, i, gap)
					}
				}
				for i, a := range adm {
					queued := int64(0)
					for j := i; j >= 0 && adm[j].at+adm[j].delay >= a.at; j-- {
						queued += adm[j].cost
					}
					if exact && queued > capacity || queued > capacity+min(3, capacity) {
						t.Fatalf("%d units queued at admission %d", queued, i)
					}
				}
			}
			got := saturate(t, lim, max(1, p/lim.Threshold/3), 20*p)
			require.InDelta(t, 20*lim.Threshold+capacity, got, 2, "a full queue, then the rate")
		})
	}
}
