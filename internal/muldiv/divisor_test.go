package muldiv

import (
	"math"
	"math/rand/v2"
	"testing"
)

// floorDiv is ⌊x/d⌋ by division, the reference.
func floorDiv(x, d int64) int64 {
	q := x / d
	if x%d != 0 && (x < 0) != (d < 0) {
		q--
	}
	return q
}

func TestDivisorFloorDivIsDivision(t *testing.T) {
	divisors := []int64{1, 2, 3, 5, 7, 10, 1000, 1 << 20, 1<<20 + 1, 999_999_937, 60_000_000, 86_400_000_000, 1<<62 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64}
	xs := []int64{0, 1, 2, math.MaxInt64, math.MaxInt64 - 1, 1 << 62, -1, -2, math.MinInt64 + 1, math.MinInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		divisors = append(divisors, rng.Int64N(math.MaxInt64)+1, rng.Int64N(1<<40)+1, rng.Int64N(1000)+1)
	}
	for _, d := range divisors {
		v := NewDivisor(d)
		cases := append([]int64{}, xs...)
		for _, k := range []int64{1, 2, 3, 1 << 20} {
			if m := d * k; m/k == d { // the multiples of d and their neighbours
				cases = append(cases, m, m-1, m+1, -m, -m+1, -m-1)
			}
		}
		for range 500 {
			cases = append(cases, rng.Int64(), rng.Int64N(min(d, math.MaxInt64/4)*4), -rng.Int64N(math.MaxInt64))
		}
		for _, x := range cases {
			if got, want := v.FloorDiv(x), floorDiv(x, d); got != want {
				t.Fatalf("NewDivisor(%d).FloorDiv(%d) = %d, want %d", d, x, got, want)
			}
		}
	}
}

func FuzzDivisorFloorDiv(f *testing.F) {
	f.Add(int64(7), int64(100))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(int64(3), int64(-10))
	f.Fuzz(func(t *testing.T, d, x int64) {
		if d <= 0 {
			return
		}
		if got, want := NewDivisor(d).FloorDiv(x), floorDiv(x, d); got != want {
			t.Fatalf("NewDivisor(%d).FloorDiv(%d) = %d, want %d", d, x, got, want)
		}
	})
}
