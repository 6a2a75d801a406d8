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
