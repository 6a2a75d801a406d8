package ratelimit

import "time"

// The window algorithms keep, like their Redis key (a count whose TTL is
// the time the window still matters plus a second; see
// lua/decide.lua.tmpl), in limitState:
//
//	a  the state's end (the script's stateEnd), a second (keepMs) before
//	   the key's expiry, a Unix time in milliseconds: the window's end
//	   (fixed_window) or the next window's end (sliding_window)
//	b  the count of the window a call counts in
//	c  sliding_window: the count of the window before it
//
// A state with no counts is no state, as the script deletes a key rather
// than decrement its counts to zero. Times are read in milliseconds, as
// Redis reads a TTL; a window's period is a whole number of them.

// fixedCheck decides cost units at now for a FixedWindow limit without
// charging them, describing the decision in d. Like the script, it first starts a new window if the
// call is in one.
func (s *limitState) fixedCheck(period, threshold, now, cost int64, d *Decision) bool {
	r, n := s.fixedWindow(period, now)
	end := time.Duration(r)*time.Millisecond - time.Duration(now%1000)*time.Microsecond
	if n+cost <= threshold {
		*d = Decision{Remaining: threshold - n - cost, ResetAfter: end}
		return true
	}
	*d = Decision{Remaining: threshold - n, RetryAfter: end, ResetAfter: end}
	return false
}

// fixedWindow returns the milliseconds until the window a call at now
// counts in ends, and its count. That is the window of the state, unless
// it has no count or has ended (its last millisecond, the key's last, is
// the next window's first); then a new window starts, now's. A clock that
// reads earlier than the window's start counts in the window.
func (s *limitState) fixedWindow(period, now int64) (r, n int64) {
	nowMs := now / 1000
	if r = s.a - nowMs; s.b == 0 || r <= 0 {
		s.a, s.b, s.c = (now-now%period+period)/1000, 0, 0
		r = s.a - nowMs
	}
	return r, s.b
}

// fixedCharge charges cost units checked by fixedCheck and returns when
// the window ends (µs).
func (s *limitState) fixedCharge(period, now, cost int64) int64 {
	s.fixedWindow(period, now)
	s.b += cost
	return s.a * 1000
}
