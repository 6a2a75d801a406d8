package ratelimit

import "time"

// slidingCheck decides cost units at now for a SlidingWindow limit without
// charging them (see SlidingWindow and the state layout in fixedwindow.go).
func (s *limitState) slidingCheck(period, threshold, now, cost int64) (bool, Decision) {
	w, at, cur, prev := s.slidingWindows(period, now)
	// The previous window's weight, rounded up to whole units: exactly
	// the condition prev×(period-elapsed)/period + cur + cost <= threshold.
	weighted := int64(0)
	if prev > 0 {
		weighted = mulDivCeil(prev, period-(at-w), period)
	}
	us := func(t int64) time.Duration { return time.Duration(t-now) * time.Microsecond }
	if weighted+cur+cost <= threshold {
		return true, Decision{Remaining: threshold - weighted - cur - cost, ResetAfter: us(w + 2*period)}
	}
	d := Decision{Remaining: max(0, threshold-weighted-cur), ResetAfter: us(w + 2*period)}
	if cur == 0 {
		d.ResetAfter = us(w + period)
	}
	// The earliest time the weighted count plus cost fits, if nobody calls.
	if room := threshold - cur - cost; room >= 0 {
		// In this window, once prev×(period-elapsed) <= room×period.
		d.RetryAfter = us(w + period - mulDivFloor(room, period, prev))
	} else {
		// In the next one, where cur is the previous window's count.
		d.RetryAfter = us(w + 2*period - mulDivFloor(threshold-cost, period, cur))
	}
	return false, d
}

// slidingWindows returns the window a call at now counts in, the time it
// is decided at, and the counts of that window and the one before, after
// dropping what the script drops (as its HINCRBY finds or creates fields):
// a call counts in now's window, or, if the clock reads earlier than the
// newest window, in the window before that if it has a count, else in the
// newest, decided at its start; a new window drops the ones before the
// previous.
func (s *limitState) slidingWindows(period, now int64) (w, at, cur, prev int64) {
	w = now - now%period
	switch {
	case s.b > 0 && s.a == w:
		return w, now, s.b, s.c
	case s.b > 0 && s.a > w && s.c > 0 && s.a-period == w:
		return w, now, s.c, 0
	case s.b > 0 && s.a > w:
		return s.a, s.a, s.b, s.c
	case s.b > 0 && s.a == w-period:
		s.c = 0
		return w, now, 0, s.b
	}
	s.a, s.b, s.c = 0, 0, 0
	return w, now, 0, 0
}

// slidingCharge charges cost units checked by slidingCheck and returns when
// they stop counting (µs).
func (s *limitState) slidingCharge(period, now, cost int64) int64 {
	w, _, _, _ := s.slidingWindows(period, now)
	switch {
	case s.b > 0 && s.a == w:
		s.b += cost
	case s.b > 0 && s.a-period == w:
		s.c += cost
	case s.b > 0 && s.a == w-period:
		s.a, s.b, s.c = w, cost, s.b
	default:
		s.a, s.b, s.c = w, cost, 0
	}
	return w + 2*period
}
