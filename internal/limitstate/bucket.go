package limitstate

import (
	"math/bits"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// bucketState is the state of a TokenBucket, LeakyBucket or GCRA limit,
// named as the script names it (check bucket in
// redislimit/lua/bucket.lua.tmpl), whose key is one string, "tat" or "tat
// tatFrac": the theoretical arrival time (TAT), the time at which the
// bucket will be empty of calls (full of tokens), as a whole microsecond
// plus a fraction of one, so that emission intervals of period/threshold
// are added exactly. The script's check bucket names ta, tf, na, nf, ka,
// kf, k, m, d and g as tatCheck, addInterval and remainingUnits do here.
type bucketState struct {
	tat     int64 // the TAT's whole µs
	tatFrac int64 // its fraction, in 1/threshold µs (of the threshold that wrote it)
}

// tatCheck decides cost units at now for the bucket p, of capacity units
// refilled at threshold per period, without charging them, describing the
// decision in d. For a leaky bucket the admitted call is told to wait
// until the bucket has drained down to it.
func (s *bucketState) tatCheck(p *Plan, now, cost int64, d *Decision) bool {
	ok, _, _ := s.tatNext(p, now, cost, d)
	return ok
}

// tatDecide is tatCheck, then tatCharge of an admitted call, sharing
// their arithmetic; for an admitted call it returns when the bucket is
// empty again (µs).
func (s *bucketState) tatDecide(p *Plan, now, cost int64, d *Decision) (bool, int64) {
	ok, na, nf := s.tatNext(p, now, cost, d)
	if !ok {
		return false, 0
	}
	s.tat, s.tatFrac = na, nf
	return true, na + ceilFrac(nf)
}

// tatNext is tatCheck, also returning the TAT that charging the call
// leaves, na + nf/threshold.
func (s *bucketState) tatNext(p *Plan, now, cost int64, d *Decision) (ok bool, na, nf int64) {
	ta, tf := s.tatFrom(p.Threshold, now)
	na, nf = p.addInterval(ta, tf, cost)
	// The bucket holds capacity units: a call is admitted when the TAT
	// it leaves is at most capacity emission intervals ahead of now.
	ka, kf := p.depth, p.depthFrac
	us := func(t int64) time.Duration { return time.Duration(t) * time.Microsecond }
	if na-now < ka || na-now == ka && nf <= kf {
		*d = Decision{
			Remaining:  p.remainingUnits(ka-(na-now), kf-nf),
			ResetAfter: us(na - now + ceilFrac(nf)),
		}
		if p.paces {
			d.Delay = us(ta - now + ceilFrac(tf))
		}
		return true, na, nf
	}
	*d = Decision{
		Remaining:  p.remainingUnits(ka-(ta-now), kf-tf),
		RetryAfter: us(na - ka - now + ceilFrac(nf-kf)),
		ResetAfter: us(ta - now + ceilFrac(tf)),
	}
	return false, na, nf
}

// tatCharge charges cost units checked by tatCheck and returns when the
// bucket is empty again (µs).
func (s *bucketState) tatCharge(p *Plan, now, cost int64) int64 {
	ta, tf := s.tatFrom(p.Threshold, now)
	s.tat, s.tatFrac = p.addInterval(ta, tf, cost)
	return s.tat + ceilFrac(s.tatFrac)
}

// tatFrom returns ta + tf/threshold, max(TAT, now): the TAT a call at now
// starts from. A fraction written under a smaller threshold rounds the TAT
// up.
func (s *bucketState) tatFrom(threshold, now int64) (ta, tf int64) {
	tat, tatFrac := s.tat, s.tatFrac
	if tatFrac >= threshold {
		tat, tatFrac = tat+1, 0
	}
	if tat < now {
		return now, 0
	}
	return tat, tatFrac
}

// addInterval returns (a + b/threshold) + cost×period/threshold in the
// same form.
func (p *Plan) addInterval(a, b, cost int64) (int64, int64) {
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
func (p *Plan) remainingUnits(d, g int64) int64 {
	if d < 0 {
		return 0
	}
	if hi, lo := bits.Mul64(uint64(d), uint64(p.Threshold)); hi == 0 && lo < 1<<62 {
		// d×threshold + g fits, as |g| < threshold: one division, by the
		// period's Divisor.
		return max(p.period.FloorDiv(int64(lo)+g), 0)
	}
	q, r := muldiv.Rem(d, p.Threshold, p.Period)
	q += p.period.FloorDiv(r + g)
	return max(q, 0)
}

// ceilFrac is 1 for a positive fraction, else 0: what rounding a time up
// to the microsecond adds to its whole part.
func ceilFrac(f int64) int64 {
	if f > 0 {
		return 1
	}
	return 0
}

// tatRefund moves the TAT back by n emission intervals, never before now
// (a full bucket, which is no state).
func (s *bucketState) tatRefund(p *Plan, now, n int64) {
	ta, tf := s.tatFrom(p.Threshold, now)
	if ta == now && tf == 0 {
		return
	}
	n = min(n, 2*p.Capacity) // more moves it to now all the same
	k, m := muldiv.Rem(n, p.Period, p.Threshold)
	na, nf := ta-k, tf-m
	if nf < 0 {
		na, nf = na-1, nf+p.Threshold
	}
	if na < now || na == now && nf == 0 {
		*s = bucketState{}
		return
	}
	s.tat, s.tatFrac = na, nf
}

// tatChargeOnTop moves the TAT on by n emission intervals, at most to
// twice the bucket's depth ahead of now, and returns when the bucket is
// empty again (µs).
func (s *bucketState) tatChargeOnTop(p *Plan, now, n int64) int64 {
	ta, tf := s.tatFrom(p.Threshold, now)
	na, nf := p.addInterval(ta, tf, min(n, 2*p.Capacity))
	ca, cf := now+2*p.depth, 2*p.depthFrac
	if cf >= p.Threshold {
		ca, cf = ca+1, cf-p.Threshold
	}
	if na > ca || na == ca && nf > cf {
		na, nf = ca, cf
	}
	s.tat, s.tatFrac = na, nf
	return na + ceilFrac(nf)
}
