// Package muldiv computes a×b/d exactly, as the limiters' algorithms and
// the Redis scripts' muldiv do, for the arguments a validated limit keeps
// in range (see limitfacts.MaxValue).
package muldiv

import "math/bits"

// Exact returns a×b/d and its remainder, computed without overflow, for
// a, b >= 0 and d > 0; ok is false when the quotient does not fit in an
// int64.
func Exact(a, b, d int64) (q, r int64, ok bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return 0, 0, false
	}
	uq, ur := bits.Div64(hi, lo, uint64(d))
	if uq > 1<<63-1 {
		return 0, 0, false
	}
	return int64(uq), int64(ur), true
}

// Rem returns ⌊a×b/d⌋ and a×b mod d.
func Rem(a, b, d int64) (q, r int64) {
	q, r, _ = Exact(a, b, d)
	return q, r
}

// Floor returns ⌊a×b/d⌋.
func Floor(a, b, d int64) int64 {
	q, _, _ := Exact(a, b, d)
	return q
}

// Ceil returns ⌈a×b/d⌉.
func Ceil(a, b, d int64) int64 {
	q, r, _ := Exact(a, b, d)
	if r > 0 {
		q++
	}
	return q
}

// Divisor divides by one positive int64 with a multiplication and a shift
// instead of a division, which costs tens of cycles on some processors;
// make it once with [NewDivisor] for a divisor used on every call.
//
// It is exact (Granlund and Montgomery, "Division by invariant integers
// using multiplication", 1994, theorem 4.2, with N = 63): for l =
// ⌈log2 d⌉ and m = ⌊2^(63+l)/d⌋ + 1, 2^(63+l) < m×d <= 2^(63+l) + d <=
// 2^(63+l) + 2^l, so ⌊x/d⌋ = ⌊m×x/2^(63+l)⌋ for every 0 <= x < 2^63; and m
// < 2^64, so m×x fits in 128 bits.
type Divisor struct {
	d     int64
	m     uint64 // the magic multiplier, m above; 0 when d is 1
	shift uint   // l - 1: m×x/2^(63+l) is the product's high word >> shift
}

// NewDivisor returns the Divisor of d, which must be positive.
func NewDivisor(d int64) Divisor {
	if d <= 1 {
		return Divisor{d: 1}
	}
	l := uint(bits.Len64(uint64(d - 1)))       // ⌈log2 d⌉, >= 1
	q, _ := bits.Div64(1<<(l-1), 0, uint64(d)) // 2^(63+l)/d; 2^(l-1) < d
	return Divisor{d: d, m: q + 1, shift: l - 1}
}

// FloorDiv returns ⌊x/d⌋ (rounded toward minus infinity).
func (v Divisor) FloorDiv(x int64) int64 {
	if x < 0 {
		q := x / v.d
		if q*v.d != x {
			q--
		}
		return q
	}
	if v.m == 0 {
		return x
	}
	hi, _ := bits.Mul64(v.m, uint64(x))
	return int64(hi >> v.shift)
}
