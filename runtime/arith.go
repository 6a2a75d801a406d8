package ratelimit

import "math/bits"

// mulDiv returns a×b/d and its remainder, computed without overflow, for
// a, b >= 0 and d > 0; ok is false when the quotient does not fit in an
// int64. The Redis script computes the same values exactly (its muldiv).
func mulDiv(a, b, d int64) (q, r int64, ok bool) {
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

// mulDivRem returns ⌊a×b/d⌋ and a×b mod d for arguments a validated limit
// keeps in range (see maxLimitValue).
func mulDivRem(a, b, d int64) (q, r int64) {
	q, r, _ = mulDiv(a, b, d)
	return q, r
}

// mulDivFloor returns ⌊a×b/d⌋ for arguments a validated limit keeps in
// range.
func mulDivFloor(a, b, d int64) int64 {
	q, _, _ := mulDiv(a, b, d)
	return q
}

// mulDivCeil returns ⌈a×b/d⌉ for arguments a validated limit keeps in range.
func mulDivCeil(a, b, d int64) int64 {
	q, r, _ := mulDiv(a, b, d)
	if r > 0 {
		q++
	}
	return q
}
