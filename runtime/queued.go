package ratelimit

import (
	"context"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// What a call that waits behind others is told, on any limiter that
// queues calls (see [OpTurn]): the memory limiter's queues and [Rule.Peek]
// of a rule with Wait.

// Behind returns what [OpTurn] tells a call of req that waits behind ahead
// others in its queue on limiter, the last of them due back after due: a
// denial, not decided ([SourceQueue]), whose RetryAfter is the soonest
// req's limits could admit it once each call ahead took a unit (a peek
// at them); when they could now, for a call that waits for one of the
// slots of slot, a concurrency limit (nil for none; its LimitIndex is
// len(req.Limits)), as [SlotPoll] says within wait, else a millisecond
// after due, when the calls ahead have come back. A limiter that queues
// calls in process tells them this; the Redis limiter's queue script is
// its twin.
func (req Request) Behind(ctx context.Context, limiter Limiter, ahead int, due time.Duration, slot *Limit, wait time.Duration) (Decision, error) {
	d := Decision{Source: SourceQueue}
	if len(req.Limits) > 0 {
		var err error
		if d, err = soonest(ctx, limiter, req, ahead); err != nil {
			return Decision{}, err
		}
	}
	if d.RetryAfter == 0 && slot != nil { // the rate limits would admit it: a slot must free
		d.RetryAfter, d.LimitIndex = limitfacts.Poll(ahead, slot.Threshold, wait), len(req.Limits)
	}
	if d.RetryAfter == 0 { // the units are there: the calls ahead have yet to come
		d.RetryAfter = due + time.Millisecond
	}
	d.ResetAfter = d.RetryAfter
	return d, nil
}

// soonest returns the denial of a call of req that waits behind ahead
// others, not decided (SourceQueue): its RetryAfter is the soonest its
// limits could admit it once each call ahead took a unit (at least),
// zero when they could now (see [queuedSpan]); LimitIndex is the limit
// a peek found the latest.
func soonest(ctx context.Context, limiter Limiter, req Request, ahead int) (Decision, error) {
	units, span := queuedSpan(&req, ahead)
	req.Cost = units
	p, err := Peek(ctx, limiter, req)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{LimitIndex: p.LimitIndex, Source: SourceQueue}
	if !p.Allowed {
		d.RetryAfter = p.RetryAfter
	}
	if len(req.Limits) == 1 {
		d.RetryAfter += span
	} else {
		d.RetryAfter = max(d.RetryAfter, span)
	}
	return d, nil
}

// queuedSpan returns, for a call of req behind ahead calls of a unit
// each, a cost to peek at and a span such that the call cannot be
// admitted before the peek's retry plus span (for one limit; for several,
// before the longer of the two). Per limit, of the n units that must be
// admitted (ahead and the call's own), a sliding log admits at most its
// Threshold in any period, so the last is a period after the one a
// Threshold before it: a period per Threshold past the remainder, which
// is the cost to peek at; a window admits at most its Threshold in a
// window, so a period per Threshold past the remainder and the next
// window (a sliding window peeks at the call's own units: what the calls
// ahead took in the window before weighs less than they took); a bucket
// admits the units past its burst (or capacity) at its
// rate (in whole µs, less one per unit, as a bucket rounds its times).
// Calendar limits add nothing. The cost is the least limit's. Each
// limit's case is its state's shape ([limitfacts.State]); its twin is the
// queue block of its redislimit/lua/<algorithm>.lua.tmpl.
func queuedSpan(req *Request, ahead int) (units int64, span time.Duration) {
	units = req.Units() + int64(ahead)
	for _, lim := range req.Limits {
		n := lim.Units(req.Cost) + int64(ahead)
		c, t := lim.MaxCost(), lim.Threshold
		rest, s := min(n, c), time.Duration(0)
		switch state := lim.facts().Facts().State; {
		case lim.Period <= 0 || lim.Calendar != "":
		case state == limitfacts.Log || state == limitfacts.Window || state == limitfacts.Windows:
			batches := (n - 1) / t
			rest = n - batches*t
			if state != limitfacts.Log {
				batches = max(batches-1, 0)
			}
			if state == limitfacts.Windows { // what the calls ahead took in the last window weighs less
				rest = lim.Units(req.Cost)
			}
			s = time.Duration(batches) * lim.Period
		case n > c: // in whole µs, less one per unit for the bucket's rounding
			us := float64(n-c)*float64(lim.Period.Microseconds())/float64(t) - float64(n-c)
			s = time.Duration(max(us, 0)) * time.Microsecond
		}
		if !lim.PerCall {
			units = min(units, rest)
		}
		span = max(span, s)
	}
	return max(units, 1), span
}
