package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// minRetrySleep is the least a waiting call sleeps after its own attempt
// was denied, even if the denial said it could retry at once, so that no
// limiter is ever polled in a tight loop.
const minRetrySleep = time.Millisecond

// lineKey identifies the calls that queue together: those of one limit
// identity and key on one limiter.
type lineKey struct {
	limiter   any // the limiter if it is a pointer (comparable), else nil
	name, key string
	perLimit  bool // key is keysIdentity of a key per limit
}

func lineKeyOf(limiter Limiter, req *Request) lineKey {
	k := lineKey{name: req.Name, key: req.Key}
	if req.Keys != nil {
		k.key, k.perLimit = keysIdentity(req.Keys), true
	}
	if t := reflect.TypeOf(limiter); t != nil && t.Kind() == reflect.Pointer {
		k.limiter = limiter
	}
	return k
}

// waitLine is the queue of the calls of one lineKey waiting in this
// process. Only the call at its head asks the limiter; the others wait for
// their turn, so N waiting calls cost one decision per attempt, not N.
type waitLine struct {
	// turn holds a token while a call is at the head. Senders blocked on
	// a channel are served in order, so the line is first come, first
	// served.
	turn chan struct{}

	mu      sync.Mutex
	members int
	closed  bool      // removed from waitLines; join another
	last    Decision  // the latest decision made for a member
	lastAt  time.Time // when it was made
}

// waitLines holds the lines that have members: lineKey → *waitLine.
// waitLineCount counts them, so calls skip the lookup while nobody waits.
var (
	waitLines     sync.Map
	waitLineCount atomic.Int64
)

// joinLine joins the line of k. With first (the denial of the caller's own
// attempt) it creates the line if there is none; without, it returns nil
// when there is none.
func joinLine(k lineKey, first *Decision) *waitLine {
	if first == nil && waitLineCount.Load() == 0 {
		return nil
	}
	for {
		v, ok := waitLines.Load(k)
		if !ok {
			if first == nil {
				return nil
			}
			var loaded bool
			if v, loaded = waitLines.LoadOrStore(k, &waitLine{turn: make(chan struct{}, 1)}); !loaded {
				waitLineCount.Add(1)
			}
		}
		line := v.(*waitLine)
		line.mu.Lock()
		if !line.closed {
			line.members++
			if first != nil {
				line.noteLocked(*first, time.Now())
			}
			line.mu.Unlock()
			return line
		}
		line.mu.Unlock()
		if waitLines.CompareAndDelete(k, line) {
			waitLineCount.Add(-1)
		}
	}
}

// leave removes a member, and the line from waitLines with its last one.
func (line *waitLine) leave(k lineKey) {
	line.mu.Lock()
	line.members--
	if line.members == 0 {
		line.closed = true
		if waitLines.CompareAndDelete(k, line) {
			waitLineCount.Add(-1)
		}
	}
	line.mu.Unlock()
}

// note records a decision made for a member.
func (line *waitLine) note(d Decision, at time.Time) {
	line.mu.Lock()
	line.noteLocked(d, at)
	line.mu.Unlock()
}

func (line *waitLine) noteLocked(d Decision, at time.Time) {
	if at.After(line.lastAt) {
		line.last, line.lastAt = d, at
	}
}

// latest returns the latest decision made for a member, with RetryAfter
// and ResetAfter counted from now.
func (line *waitLine) latest() Decision {
	line.mu.Lock()
	d, at := line.last, line.lastAt
	line.mu.Unlock()
	elapsed := time.Since(at)
	d.RetryAfter = max(d.RetryAfter-elapsed, 0)
	d.ResetAfter = max(d.ResetAfter-elapsed, 0)
	return d
}

// deadline returns when a call that started waiting at start must stop:
// after r.Wait, or at ctx's deadline if that is sooner.
func (r *Rule) deadline(ctx context.Context, start time.Time) time.Time {
	end := start.Add(r.Wait)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end
}

// wait makes a denied call, a member of line, wait to be admitted.
func (r *Rule) wait(ctx context.Context, limiter Limiter, req *Request, k lineKey, line *waitLine, start time.Time) (outcome, error) {
	o, err := r.waitInLine(ctx, limiter, req, line, r.deadline(ctx, start))
	line.leave(k)
	if err == nil && o.decided && o.d.Allowed {
		err = r.pace(ctx, o.d.Delay)
	}
	return o, err
}

// waitInLine waits for the head of the line and, there, for admission.
func (r *Rule) waitInLine(ctx context.Context, limiter Limiter, req *Request, line *waitLine, deadline time.Time) (outcome, error) {
	if d := line.latest(); !d.Allowed && d.RetryAfter > time.Until(deadline) {
		// Nothing will be admitted within the budget: the calls ahead
		// were just told so.
		return outcome{d: d, limits: req.Limits, decided: true}, r.limitError(req, d)
	}
	select {
	case line.turn <- struct{}{}:
	default:
		timer := time.NewTimer(time.Until(deadline))
		select {
		case line.turn <- struct{}{}:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return r.stopped(ctx, req, line.latest())
		case <-timer.C:
			// The budget ran out in the line: one last try of its own.
			return r.attempt(ctx, limiter, req, line)
		}
	}
	defer func() { <-line.turn }()
	tried := false
	for {
		if d := line.latest(); !d.Allowed {
			pause := d.RetryAfter
			if tried {
				pause = max(pause, minRetrySleep)
			}
			if pause > 0 {
				left := time.Until(deadline)
				if pause > left {
					return outcome{d: d, limits: req.Limits, decided: true}, r.limitError(req, d)
				}
				if err := sleepCtx(ctx, min(retryJitter(pause), left)); err != nil {
					return r.stopped(ctx, req, line.latest())
				}
			}
		}
		o, err := r.attempt(ctx, limiter, req, line)
		if err == nil || !o.decided || ctx.Err() != nil || o.d.RetryAfter > time.Until(deadline) {
			return o, err
		}
		tried = true
	}
}

// attempt asks the limiter once for a waiting call and notes the decision
// in its line. A denial is returned as a *LimitError.
func (r *Rule) attempt(ctx context.Context, limiter Limiter, req *Request, line *waitLine) (outcome, error) {
	if ctx.Err() != nil {
		return r.stopped(ctx, req, line.latest())
	}
	d, limits, err := r.allow(ctx, limiter, req)
	if err != nil {
		if ctx.Err() != nil {
			return r.stopped(ctx, req, line.latest())
		}
		return outcome{limits: req.Limits}, r.failure(ctx, limiter, err)
	}
	line.note(d, time.Now())
	o := outcome{d: d, limits: limits, decided: true}
	if d.Allowed {
		return o, nil
	}
	decided := *req
	decided.Limits = limits // the fallback's, when it decided
	return o, r.limitError(&decided, d)
}

// stopped returns the error of a call whose ctx ended while it waited:
// it wraps both ctx.Err() and the LimitError of the latest denial d.
func (r *Rule) stopped(ctx context.Context, req *Request, d Decision) (outcome, error) {
	d.Allowed = false
	return outcome{d: d, limits: req.Limits, decided: true},
		fmt.Errorf("%w while waiting: %w", ctx.Err(), r.limitError(req, d))
}

// retryJitter returns d plus up to 10% of it, so that callers told the same
// RetryAfter do not all come back at once.
func retryJitter(d time.Duration) time.Duration {
	return d + rand.N(d/10+1)
}

// sleepCtx waits for d or until ctx ends, returning ctx.Err() then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
