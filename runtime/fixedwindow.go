package ratelimit

import "time"

// The window algorithms keep, like the Redis hash of lua/decide.lua.tmpl (one
// field per window start, µs, holding the window's count), the newest
// window and the one before it in limitState:
//
//	a  the start of the newest window with a field (µs)
//	b  its count; 0 means the hash is empty
//	c  the count of window a-period (0: no field)
//
// FixedWindow and SlidingWindow share this layout, as they share the hash.

// fixedCheck decides cost units at now for a FixedWindow limit without
// charging them. Like the script, it first drops the windows a call in a
// new window drops.
func (s *limitState) fixedCheck(period, threshold, now, cost int64) (bool, Decision) {
	w, n := s.fixedWindow(period, now)
	end := time.Duration(w+period-now) * time.Microsecond
	if n+cost <= threshold {
		return true, Decision{Remaining: threshold - n - cost, ResetAfter: end}
	}
	return false, Decision{Remaining: threshold - n, RetryAfter: end, ResetAfter: end}
}

// fixedWindow returns the start of the window a call at now counts in and
// its count. That is now's window, or the newest one if the clock reads
// earlier than its start (a call counts in the window before the newest
// only if that window's field exists, as HINCRBY finds it).
func (s *limitState) fixedWindow(period, now int64) (w, n int64) {
	w = now - now%period
	switch {
	case s.b > 0 && s.a == w:
		return w, s.b
	case s.b > 0 && s.a > w && s.c > 0 && s.a-period == w:
		return w, s.c
	case s.b > 0 && s.a > w:
		s.c = 0 // the script deletes every field older than the newest
		return s.a, s.b
	}
	s.a, s.b, s.c = w, 0, 0 // a new window: older fields are deleted
	return w, 0
}

// fixedCharge charges cost units checked by fixedCheck and returns when
// the window ends (µs).
func (s *limitState) fixedCharge(period, now, cost int64) int64 {
	w, _ := s.fixedWindow(period, now)
	switch {
	case s.b > 0 && s.a == w:
		s.b += cost
	case s.a-period == w:
		s.c += cost
	default:
		s.a, s.b, s.c = w, cost, 0
	}
	return w + period
}
