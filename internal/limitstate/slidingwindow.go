package limitstate

import (
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
)

// slidingCheck decides cost units at now for a SlidingWindow limit without
// charging them (see SlidingWindow and windowState). Its twin is check
// sliding_window, which names p, r, cur, prev, covered, weighted and room
// as here.
func (w *windowState) slidingCheck(period, threshold, now, cost int64, d *Decision) bool {
	p := period / 1000
	r, cur, prev := w.slidingWindows(period, now)
	// The previous window's weight, rounded up to whole units: exactly
	// the condition prev×(period-elapsed)/period + cur + cost <= threshold,
	// in milliseconds. r is 2p - elapsed, or more if the clock reads
	// earlier than the window's start, which decides the call at the start.
	weighted := int64(0)
	if prev > 0 {
		covered := min(p, r-p) // the ms of the previous window still covered
		weighted = muldiv.Ceil(prev, covered, p)
	}
	// ms returns the time until ms t milliseconds from now's (the
	// script's t * 1000 - frac).
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

// slidingWindows returns r, the milliseconds until the state stops
// mattering (the end of the window after the one a call at now counts
// in), and cur and prev, the counts of that window and the one before.
// Like the script, it starts a new window with none before when the state
// has no counts or has ended (its last millisecond is the first of the
// window after next), and moves the count to the previous window's when
// the call is in the next window.
func (w *windowState) slidingWindows(period, now int64) (r, cur, prev int64) {
	p, nowMs := period/1000, now/1000
	r = w.stateEnd - nowMs
	switch {
	case w.count == 0 && w.prev == 0, r <= 0:
		w.stateEnd, w.count, w.prev = (now-now%period+2*period)/1000, 0, 0
		r = w.stateEnd - nowMs
	case r <= p:
		w.stateEnd, w.count, w.prev = w.stateEnd+p, 0, w.count
		r += p
	}
	return r, w.count, w.prev
}

// slidingCharge charges cost units checked by slidingCheck and returns when
// they stop counting (µs).
func (w *windowState) slidingCharge(period, now, cost int64) int64 {
	w.slidingWindows(period, now)
	w.count += cost
	return w.stateEnd * 1000
}

// windowEnd returns the end (ms) of the aligned window of period (µs) that
// the time at (µs) is in.
func windowEnd(period, at int64) int64 { return (at - at%period + period) / 1000 }

// slidingRefund takes up to n units off the current window's count, if it
// is the window that the time at is in and it has not ended.
func (w *windowState) slidingRefund(period, now, at, n int64) {
	end := windowEnd(period, at)
	if w.count == 0 || w.stateEnd-period/1000 != end || now/1000 >= end {
		return
	}
	w.count -= min(n, w.count)
}

// slidingChargeOnTop charges n units without deciding, at most what takes
// the current window's count to twice capacity units or to
// [limitfacts.MaxSlidingWindowThreshold], which its Redis key packs, and returns when
// they stop counting (µs), or 0 when it charged nothing.
func (w *windowState) slidingChargeOnTop(period, capacity, now, n int64) int64 {
	w.slidingWindows(period, now)
	if n = min(n, min(2*capacity, limitfacts.MaxSlidingWindowThreshold)-w.count); n <= 0 {
		return 0
	}
	return w.slidingCharge(period, now, n)
}
