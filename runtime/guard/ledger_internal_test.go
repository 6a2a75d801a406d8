package guard

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestLedgerChargesLaterNeverEarlier: a ledger keeps at most
// MaxCarriedPerCall admissions of a call however many it records, every
// unit at its time or later (it denies more, never less), and not much
// later: by at most an eighth of the span, in runs of calls spaced
// randomly, from bursts to pauses longer than the merge's sixteenth.
func TestLedgerChargesLaterNeverEarlier(t *testing.T) {
	req := ratelimit.Request{Name: "n", Key: "k", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1 << 40}}}
	span := time.Hour.Microseconds()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		c := newCarryBack()
		c.ledger = true
		var admitted []int64
		now := int64(1e15)
		for len(admitted) < 5000 && now < 1e15+span/2 {
			switch rng.IntN(4) {
			case 0:
				now += rng.Int64N(span / 10)
			default:
				now += rng.Int64N(1000)
			}
			c.record(&req, nil, now)
			admitted = append(admitted, now)
		}
		got := requireKeptNeverEarlier(t, c.snapshot(now), admitted, seed)
		// And at least those admitted an eighth of the span before are
		// charged by each time (not much later).
		for _, at := range admitted {
			require.GreaterOrEqual(t, chargedBy(got, at+span/8), int64(countBy(admitted, at)), "seed %d", seed)
		}
	}
}

// requireKeptNeverEarlier requires got, what a carry-back kept of the
// admissions at the times admitted (sorted), to be at most
// MaxCarriedPerCall admissions holding every unit, none charged before it
// was admitted; it returns got sorted by time.
func requireKeptNeverEarlier(t *testing.T, got []Admission, admitted []int64, seed uint64) []Admission {
	t.Helper()
	require.LessOrEqual(t, len(got), MaxCarriedPerCall)
	slices.SortFunc(got, func(a, b Admission) int { return a.At.Compare(b.At) })
	var total int64
	for _, a := range got {
		total += a.Req.Cost
	}
	require.EqualValues(t, len(admitted), total, "every unit is kept")
	for _, at := range admitted {
		require.LessOrEqual(t, chargedBy(got, at), int64(countBy(admitted, at)), "seed %d: a unit is charged before it was admitted", seed)
	}
	return got
}

// chargedBy returns the units of got charged at or before at.
func chargedBy(got []Admission, at int64) int64 {
	var n int64
	for _, a := range got {
		if a.At.UnixMicro() <= at {
			n += a.Req.Cost
		}
	}
	return n
}

// countBy returns how many of admitted are at or before at.
func countBy(admitted []int64, at int64) int {
	n, _ := slices.BinarySearch(admitted, at+1)
	return n
}

// TestLedgerForgetsClosedWindows: a ledger forgets the admissions whose
// windows all closed (the longest limit's), those of the call it records
// at once and the others when swept, and keeps the others; the count it
// keeps follows.
func TestLedgerForgetsClosedWindows(t *testing.T) {
	c := newCarryBack()
	c.ledger = true
	lims := []ratelimit.Limit{{Period: time.Minute, Threshold: 100}, {Algorithm: ratelimit.SlidingWindow, Period: time.Minute, Threshold: 100}}
	short := ratelimit.Request{Name: "short", Key: "k", Limits: lims[:1]}
	long := ratelimit.Request{Name: "long", Key: "k", Limits: lims}
	now, minute := int64(1e15), time.Minute.Microseconds()
	c.record(&short, nil, now)
	c.record(&long, nil, now)
	c.record(&long, nil, now+minute)
	assert.Equal(t, 3, c.size())
	assert.Len(t, c.snapshot(now+minute), 2, "the log's window closed; the sliding window's still weighs")
	c.sweep(now + minute)
	assert.Equal(t, 2, c.size(), "swept")
	c.record(&long, nil, now+2*minute)
	assert.Equal(t, 2, c.size(), "the first admission of long closed as it recorded the third")
	assert.Len(t, c.snapshot(now+2*minute), 2)
}

// TestLedgerIsBounded: a ledger keeps at most MaxCarried admissions,
// counting the units beyond as dropped, and makes room as windows close.
func TestLedgerIsBounded(t *testing.T) {
	c := newCarryBack()
	c.ledger = true
	now := int64(1e15)
	req := ratelimit.Request{Name: "n", Cost: 2, Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 100, PerCall: true}}}
	for range MaxCarried + 10 {
		c.record(&req, nil, now)
	}
	assert.Equal(t, MaxCarried, c.size())
	assert.EqualValues(t, 20, c.dropped.Load())
	c.sweep(now + time.Second.Microseconds())
	c.record(&req, nil, now+time.Second.Microseconds())
	assert.Equal(t, 1, c.size(), "the closed windows are swept")
}

// BenchmarkLedgerRecord: what recording an admission costs a ledger, on
// one key (its admissions merged) and on a new time of 64 keys in turn.
func BenchmarkLedgerRecord(b *testing.B) {
	c := newCarryBack()
	c.ledger = true
	req := ratelimit.Request{Name: "svc.Store.Get", Key: "user-1", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Minute, Threshold: 1000}}}
	now := int64(1e15)
	b.ReportAllocs()
	for b.Loop() {
		now++
		c.record(&req, nil, now)
	}
}

// TestCarryMergesTheNearestAdmissions: the fallback keeps at most
// MaxCarriedPerCall admissions of a call however many it admits, every
// unit at its time or later (it denies more, never less), and merges the
// admissions nearest in time: of bursts a period apart (an outage's
// shares, as the fallback spends them), each unit is charged within its
// own burst, never a burst later.
func TestCarryMergesTheNearestAdmissions(t *testing.T) {
	req := ratelimit.Request{Name: "n", Key: "k", Limits: []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Period: time.Second, Threshold: 2000}}}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2))
		c := newCarryBack()
		var admitted []int64
		now := int64(1e15)
		for burst := range 4 {
			start := int64(1e15) + int64(burst)*time.Second.Microseconds()
			now = max(now, start)
			for range 100 + rng.IntN(400) {
				now += rng.Int64N(200)
				c.record(&req, nil, now)
				admitted = append(admitted, now)
			}
		}
		got := requireKeptNeverEarlier(t, c.take(), admitted, seed)
		for burst := range 4 {
			end := int64(1e15) + int64(burst)*time.Second.Microseconds() + 200*time.Millisecond.Microseconds()
			require.EqualValues(t, countBy(admitted, end), chargedBy(got, end), "seed %d: burst %d's units are charged within it", seed, burst)
		}
	}
}
