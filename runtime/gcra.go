package ratelimit

import (
	"math/bits"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// TokenBucket, LeakyBucket and GCRA keep one value per limit, as the Redis
// script keeps one string: the theoretical arrival time (TAT), the time at
// which the bucket will be empty of calls (full of tokens), as a whole
// microsecond a plus a fraction b/threshold of one, 0 <= b < threshold, so
// that emission intervals of period/threshold are added exactly:
//
//	a  TAT, whole µs
//	b  TAT fraction, in 1/threshold µs
//
// The script's check bucket names ta, tf, na, nf, ka, kf, k, m, d and g as
// tatCheck, addInterval and remainingUnits do here.

// tatCheck decides cost units at now for the bucket p, of capacity units
// refilled at threshold per period, without charging them, describing the
// decision in d. For a leaky
// bucket the admitted call is told to wait until the bucket has drained
// down to it.
func (s *limitState) tatCheck(p *memoryPlan, now, cost int64, d *Decision) bool {
	period, threshold := p.Period, p.Threshold
	ta, tf := s.tat(threshold, now)
	na, nf := p.addInterval(ta, tf, cost)
	// The bucket holds capacity units: a call is admitted when the TAT
	// it leaves is at most capacity emission intervals ahead of now.
	ka, kf := p.depth, p.depthFrac
	us := func(t int64) time.Duration { return time.Duration(t) * time.Microsecond }
	if na-now < ka || na-now == ka && nf <= kf {
		*d = Decision{
			Remaining:  remainingUnits(ka-(na-now), kf-nf, period, threshold),
			ResetAfter: us(na - now + ceilFrac(nf)),
		}
		if p.counter == leakyCounter {
			d.Delay = us(ta - now + ceilFrac(tf))
		}
		return true
	}
	*d = Decision{
		Remaining:  remainingUnits(ka-(ta-now), kf-tf, period, threshold),
		RetryAfter: us(na - ka - now + ceilFrac(nf-kf)),
		ResetAfter: us(ta - now + ceilFrac(tf)),
	}
	return false
}

// tatCharge charges cost units checked by tatCheck and returns when the
// bucket is empty again (µs).
func (s *limitState) tatCharge(p *memoryPlan, now, cost int64) int64 {
	ta, tf := s.tat(p.Threshold, now)
	s.a, s.b = p.addInterval(ta, tf, cost)
	return s.a + ceilFrac(s.b)
}

// tat returns max(TAT, now). A fraction written under a smaller threshold
// rounds the TAT up.
func (s *limitState) tat(threshold, now int64) (int64, int64) {
	a, b := s.a, s.b
	if b >= threshold {
		a, b = a+1, 0
	}
	if a < now {
		return now, 0
	}
	return a, b
}

// addInterval returns (a + b/threshold) + cost×period/threshold in the
// same form.
func (p *memoryPlan) addInterval(a, b, cost int64) (int64, int64) {
	k, m := p.unit, p.unitFrac
	if cost != 1 {
		k, m = muldiv.Rem(cost, p.Period, p.Threshold)
	}
	a, b = a+k, b+m
	if b >= p.Threshold {
		a, b = a+1, b-p.Threshold
	}
	return a, b
}

// remainingUnits returns how many whole emission intervals of
// period/threshold fit in d + g/threshold µs, or 0 if none.
func remainingUnits(d, g, period, threshold int64) int64 {
	if d < 0 {
		return 0
	}
	if hi, lo := bits.Mul64(uint64(d), uint64(threshold)); hi == 0 && lo < 1<<62 {
		// d×threshold + g fits, as |g| < threshold: one division.
		return max(floorDiv(int64(lo)+g, period), 0)
	}
	q, r := muldiv.Rem(d, threshold, period)
	q += floorDiv(r+g, period)
	return max(q, 0)
}

// floorDiv returns ⌊x/y⌋ for y > 0.
func floorDiv(x, y int64) int64 {
	q := x / y
	if x%y < 0 {
		q--
	}
	return q
}

// ceilFrac is 1 for a positive fraction, else 0: what rounding a time up
// to the microsecond adds to its whole part.
func ceilFrac(f int64) int64 {
	if f > 0 {
		return 1
	}
	return 0
}
