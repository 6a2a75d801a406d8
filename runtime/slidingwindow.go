package ratelimit

import (
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// slidingCheck decides cost units at now for a SlidingWindow limit without
// charging them (see SlidingWindow and the state layout in fixedwindow.go).
// The script's check sliding_window names p, r, cur, prev, covered,
// weighted and room as here.
func (s *limitState) slidingCheck(period, threshold, now, cost int64, d *Decision) bool {
	p := period / 1000
	r, cur, prev := s.slidingWindows(period, now)
	// The previous window's weight, rounded up to whole units: exactly
	// the condition prev×(period-elapsed)/period + cur + cost <= threshold,
	// in milliseconds. r is 2p - elapsed, or more if the clock reads
	// earlier than the window's start, which decides the call at the start.
	weighted := int64(0)
	if prev > 0 {
		covered := min(p, r-p) // the ms of the previous window still covered
		weighted = muldiv.Ceil(prev, covered, p)
	}
	// ms returns the time until ms t milliseconds from now's.
	ms := func(t int64) time.Duration {
		return time.Duration(t)*time.Millisecond - time.Duration(now%1000)*time.Microsecond
	}
	if weighted+cur+cost <= threshold {
		*d = Decision{Remaining: threshold - weighted - cur - cost, ResetAfter: ms(r)}
		return true
	}
	*d = Decision{Remaining: max(0, threshold-weighted-cur), ResetAfter: ms(r)}
	if cur == 0 {
		d.ResetAfter = ms(r - p)
	}
	// The earliest millisecond the weighted count plus cost fits, if
	// nobody calls.
	if room := threshold - cur - cost; room >= 0 {
		// In this window, once prev×(p-elapsed) <= room×p.
		d.RetryAfter = ms(r - p - muldiv.Floor(room, p, prev))
	} else {
		// In the next one, where cur is the previous window's count.
		d.RetryAfter = ms(r - muldiv.Floor(threshold-cost, p, cur))
	}
	return false
}

// slidingWindows returns the milliseconds until the state stops mattering
// (the end of the window after the one a call at now counts in) and the
// counts of that window and the one before. Like the script, it starts a
// new window with none before when the state has no counts or has ended
// (its last millisecond is the first of the window after next), and moves
// the count to the previous window's when the call is in the next window.
func (s *limitState) slidingWindows(period, now int64) (r, cur, prev int64) {
	p, nowMs := period/1000, now/1000
	r = s.a - nowMs
	switch {
	case s.b == 0 && s.c == 0, r <= 0:
		s.a, s.b, s.c = (now-now%period+2*period)/1000, 0, 0
		r = s.a - nowMs
	case r <= p:
		s.a, s.b, s.c = s.a+p, 0, s.b
		r += p
	}
	return r, s.b, s.c
}

// slidingCharge charges cost units checked by slidingCheck and returns when
// they stop counting (µs).
func (s *limitState) slidingCharge(period, now, cost int64) int64 {
	s.slidingWindows(period, now)
	s.b += cost
	return s.a * 1000
}
