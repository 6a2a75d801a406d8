package limitstate

import "time"

// windowState is the state of a FixedWindow or SlidingWindow limit, named
// as the script names it (check fixed_window and check sliding_window in
// redislimit/lua/fixed_window.lua.tmpl). Its Redis key is a string holding
// count (fixed_window) or prev * prevScale + count (sliding_window), which
// expires a second (keepMs) after stateEnd. A state with no counts is no
// state, as the script deletes a key rather than decrement its counts to
// zero. Times are read in milliseconds, as Redis reads a TTL; a window's
// period is a whole number of them.
type windowState struct {
	// stateEnd is when the state stops mattering, a Unix time in ms: the
	// window's end (fixed_window) or the next window's end
	// (sliding_window), a second before its key's expiry.
	stateEnd int64
	// count is the count of the window a call counts in (sliding_window's
	// script calls it cur).
	count int64
	// prev is the count of the window before it (sliding_window).
	prev int64
}

// fixedCheck decides cost units at now for a FixedWindow limit without
// charging them, describing the decision in d. Like the script, it first
// starts a new window if the call is in one. Its twin is check
// fixed_window, which names r, frac, count and res as here.
func (w *windowState) fixedCheck(p *Plan, now, cost int64, d *Decision) bool {
	threshold := p.Threshold
	r := w.fixedWindow(p, now)
	frac := now % 1000
	res := time.Duration(r*1000-frac) * time.Microsecond
	count := w.count + cost // the window's count with the call (INCRBY's reply)
	if count <= threshold {
		*d = Decision{Remaining: threshold - count, ResetAfter: res}
		return true
	}
	*d = Decision{Remaining: threshold - count + cost, RetryAfter: res, ResetAfter: res}
	return false
}

// fixedWindow returns r, the milliseconds until the window a call at now
// counts in ends. That is the window of the state, unless it has no count
// or has ended (its last millisecond, the key's last, is the next window's
// first); then a new window starts, now's. A clock that reads earlier
// than the window's start counts in the window.
func (w *windowState) fixedWindow(p *Plan, now int64) (r int64) {
	nowMs := now / 1000
	if r = w.stateEnd - nowMs; w.count == 0 || r <= 0 {
		w.stateEnd, w.count, w.prev = p.windowEnd(now)/1000, 0, 0
		r = w.stateEnd - nowMs
	}
	return r
}

// fixedCharge charges cost units checked by fixedCheck and returns when
// the window ends (µs).
func (w *windowState) fixedCharge(p *Plan, now, cost int64) int64 {
	w.fixedWindow(p, now)
	w.count += cost
	return w.stateEnd * 1000
}

// windowEnd returns the end (µs) of the fixed window that holds now: the
// next multiple of the period since the Unix epoch, or the start of the
// next calendar period in its zone (a whole second, as zone offsets and
// their changes are). The script's twin of it is Go's too: redislimit
// passes the calendar's bounds (limitfacts.Calendar.Bounds).
func (p *Plan) windowEnd(now int64) int64 {
	if p.calendar != nil {
		return p.calendar.End(now)
	}
	return now - now%p.Period + p.Period
}

// fixedRefund takes up to n units off the window that the time at is in
// (a calendar period's too), if the state is that window and it has not
// ended.
func (w *windowState) fixedRefund(p *Plan, now, at, n int64) {
	end := p.windowEnd(at) / 1000
	if w.count == 0 || w.stateEnd != end || now/1000 >= end {
		return
	}
	w.count -= min(n, w.count)
}

// fixedChargeOnTop charges n units without deciding, at most what takes
// the window's count to twice the limit's capacity, and returns when the
// window ends (µs), or 0 when it charged nothing.
func (w *windowState) fixedChargeOnTop(p *Plan, now, n int64) int64 {
	w.fixedWindow(p, now)
	if n = min(n, 2*p.Capacity-w.count); n <= 0 {
		return 0
	}
	return w.fixedCharge(p, now, n)
}
