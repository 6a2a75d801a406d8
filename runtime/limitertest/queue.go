package limitertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// queue runs the crosses of queues of waiting calls (ratelimit.OpTurn),
// or, for a backend that keeps none, queue/unsupported: a rule with Wait
// still waits (the wait crosses), in each process's order.
func (s *suite) queue(t *testing.T) {
	if _, ok := queueOf(s.b.New(t)); !ok {
		t.Run("unsupported", func(t *testing.T) {
			t.Skip("the limiter offers no ratelimit.OpTurn: waiting calls queue in each process's order")
		})
		return
	}
	for _, alg := range ratelimit.Algorithms() {
		if s.caps.algorithms[alg] != "" {
			continue
		}
		t.Run(string(alg)+"/turns", func(t *testing.T) { s.turns(t, alg, false) })
		t.Run(string(alg)+"/order", func(t *testing.T) { s.queueOrder(t, alg, "check") })
		t.Run(string(alg)+"/reserve/order", func(t *testing.T) { s.queueOrder(t, alg, "reserve") })
	}
	t.Run("keys_per_line/turns", func(t *testing.T) { s.turns(t, ratelimit.GCRA, true) })
	t.Run("concurrency/order", func(t *testing.T) { s.slotOrder(t) })
	t.Run("concurrency/turns", func(t *testing.T) { s.slotTurns(t) })
}

// slotTurns: ReserveSlotInTurn step by step on the suite's clock, on two
// slots both held. A first and a second waiter get places; once both
// slots are free, the second, back first, takes one (two free, one call
// ahead of it); a new call then does not take the last (one free, one
// call ahead: the first waiter's), and the first waiter, back, does.
func (s *suite) slotTurns(t *testing.T) {
	s.needClock(t)
	need(t, "hold concurrency slots", s.caps.slots)
	slot := ratelimit.Limit{Algorithm: concurrency, Threshold: 2, Period: time.Minute}
	req := ratelimit.Request{Name: "queue/slot_turns", Key: "ada"}
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			q, _ := queueOf(l.limiter)
			h, _ := slotsOf(l.limiter)
			turn := func(what, token string, ticket int64) (ratelimit.Decision, int64) {
				d, held, _, err := q.ReserveSlotInTurn(e.ctx, req, slot, token, ticket, time.Hour)
				e.check(err == nil, "%s: %s: %v", l.name, what, err)
				return d, held
			}
			for _, token := range []string{"one", "two"} {
				d, _, err := h.ReserveSlot(e.ctx, req, slot, token)
				e.check(err == nil && d.Allowed, "%s: a slot of two: %+v, %v", l.name, d, err)
			}
			first, t1 := turn("the first waiter", "first", 0)
			e.check(!first.Allowed && t1 != 0, "%s: the first waiter, no slot free: %+v (ticket %d)", l.name, first, t1)
			second, t2 := turn("the second waiter", "second", 0)
			e.check(!second.Allowed && second.Source == ratelimit.SourceQueue && t2 > t1, "%s: the second waiter: %+v (ticket %d after %d)", l.name, second, t2, t1)
			for _, token := range []string{"one", "two"} {
				e.check(h.ReleaseSlot(e.ctx, req, slot, token) == nil, "%s: ReleaseSlot", l.name)
			}
			e.advance(second.RetryAfter)
			d, held := turn("the second waiter, back first with two slots free", "second", t2)
			e.check(d.Allowed && held == 0, "%s: the second waiter did not take one of two free slots with one call ahead: %+v", l.name, d)
			d, t3 := turn("a new call, one slot free", "third", 0)
			e.check(!d.Allowed && d.Source == ratelimit.SourceQueue && t3 > t1, "%s: a new call took the slot the first waiter needs: %+v (ticket %d)", l.name, d, t3)
			d, held = turn("the first waiter, back", "first", t1)
			e.check(d.Allowed && held == 0, "%s: the first waiter did not take the last slot: %+v", l.name, d)
			e.check(q.Dequeue(e.ctx, req, t3) == nil, "%s: Dequeue", l.name)
		}
	})
}

// slotOrder: on each limiter in turn, in real time, calls of a rule of
// one concurrency slot that began to wait for it one after another, while
// another call held it, take it in that order as each gives it back; none
// asks again before the RetryAfter it was told behind others, and a
// Rule.Peek while they wait tells the slot's denial behind them.
func (s *suite) slotOrder(t *testing.T) {
	need(t, "hold concurrency slots", s.caps.slots)
	const waiters = 5
	r := &ratelimit.Rule{Name: "queue/slots", Limits: []ratelimit.Limit{{Algorithm: concurrency, Threshold: 1}}, Wait: time.Minute}
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			q, _ := queueOf(l.limiter)
			w := &queuedLimiter{Limiter: l.limiter, q: q, back: map[int64]time.Time{}, slot: true}
			holder, err := r.Reserve(e.ctx, w, 1, l.name)
			e.check(err == nil, "%s: the first call: %v", l.name, err)
			var errs [waiters]error
			var peeked ratelimit.Decision
			var peekErr error
			e.whileRunning(func() {
				var wg sync.WaitGroup
				for i := range waiters {
					placed, done := w.placed(), make(chan struct{})
					wg.Go(func() {
						defer close(done)
						var res *ratelimit.Reservation
						if res, errs[i] = r.Reserve(e.ctx, w, 1, l.name); errs[i] == nil {
							time.Sleep(2 * time.Millisecond)
							errs[i] = res.Release(e.ctx)
						}
					})
					w.placedBeyond(placed, done) // so the next begins to wait after it
				}
				peeked, peekErr = r.Peek(e.ctx, w, l.name)
				if holder != nil {
					e.check(holder.Release(e.ctx) == nil, "%s: Release", l.name)
				}
				wg.Wait()
			})
			w.inOrder(e, l.name, errs[:])
			e.check(peekErr == nil && !peeked.Allowed && peeked.Source == ratelimit.SourceQueue && peeked.LimitIndex == 0 && peeked.RetryAfter > 0,
				"%s: while calls waited for the slot, Rule.Peek told %+v, %v; want the slot's denial behind them", l.name, peeked, peekErr)
		}
	})
}

// turnLimits returns one limit of alg admitting a call per period, and
// with keys set a second line for every call as one beside it.
func turnLimits(alg ratelimit.Algorithm, period time.Duration, keys bool) []ratelimit.Limit {
	limits := []ratelimit.Limit{{Algorithm: alg, Period: period, Threshold: 1}}
	if keys {
		limits = append(limits, ratelimit.Limit{Period: time.Hour, Threshold: 100})
	}
	return limits
}

// turns: AllowInTurn step by step on the suite's clock. A denied call
// that may wait gets a place; a call behind it is told, without being
// decided (SourceQueue), to come back no sooner than two units free; once
// a unit is free, neither a call behind the first nor a new one takes it,
// and the first does; a call that gives up frees its place, and one that
// stays away past its due time and QueueGrace loses it, so a new call is
// decided at once; a call whose denial is beyond its wait gets no place.
// Waiting counts the places that hold, and Rule.Peek of a rule with Wait
// tells what a new call would be told: its limits' denial while nobody
// waits, else the new call's answer behind the waiters.
func (s *suite) turns(t *testing.T, alg ratelimit.Algorithm, keys bool) {
	s.needClock(t)
	period := 10 * time.Second
	r := &ratelimit.Rule{Name: "queue/turns/" + string(alg), Limits: turnLimits(alg, period, keys)}
	req := ratelimit.Request{Name: r.Name, Key: "ada", Limits: r.Limits, Rule: r}
	peekKeys := []string{"ada"}
	if keys {
		r.KeyExprs = []string{"user", ""}
		req.Key, req.Keys = "", []string{"ada", ""}
		peekKeys = req.Keys
	}
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			q, _ := queueOf(l.limiter)
			if _, _, _, err := q.AllowInTurn(e.ctx, req, 0, 0); errors.Is(err, errors.ErrUnsupported) {
				continue // it may decline a call it cannot queue: the call waits in its process's order (the wait crosses)
			}
			turn := func(what string, ticket int64, wait time.Duration) (ratelimit.Decision, int64) {
				d, held, at, err := q.AllowInTurn(e.ctx, req, ticket, wait)
				e.check(err == nil, "%s: %s: %v", l.name, what, err)
				e.check(d.Allowed == !at.IsZero(), "%s: %s: admitted %v, charged at %v", l.name, what, d.Allowed, at)
				return d, held
			}
			hour := time.Hour
			waiter := r.Clone()
			waiter.Wait = hour
			waiting := func(what string, want int) {
				n, due, err := q.Waiting(e.ctx, req)
				e.check(err == nil && n == want && due >= 0, "%s: %s: Waiting says %d (the last due in %s), %v; want %d", l.name, what, n, due, err, want)
			}
			peek := func(what string) ratelimit.Decision {
				d, err := waiter.Peek(e.ctx, l.limiter, peekKeys...)
				e.check(err == nil, "%s: %s: Rule.Peek: %v", l.name, what, err)
				return d
			}
			for i := 0; ; i++ { // use the key's units up
				d, held := turn("a call before any waits", 0, 0)
				e.check(held == 0, "%s: a call that may not wait got a place", l.name)
				if !d.Allowed {
					break
				}
				e.check(i < 10, "%s: 10 calls admitted by a limit of 1", l.name)
			}
			waiting("nobody waits", 0)
			p := peek("nobody waits")
			e.check(!p.Allowed && p.Source != ratelimit.SourceQueue, "%s: with nobody waiting, Rule.Peek of a rule with Wait is not its limits' denial: %+v", l.name, p)
			first, t1 := turn("the first waiter", 0, hour)
			e.check(!first.Allowed && t1 != 0 && first.Source != ratelimit.SourceQueue, "%s: the first waiter is decided, denied and gets a place: %+v, ticket %d", l.name, first, t1)
			second, t2 := turn("the second waiter", 0, hour)
			e.check(!second.Allowed && second.Source == ratelimit.SourceQueue && t2 > t1, "%s: the second waiter is not decided and gets a later place: %+v, ticket %d after %d", l.name, second, t2, t1)
			// Behind a call of a unit, it needs two: a period more for a
			// log or a bucket admitting one per period (a window may
			// admit it as its next window begins), less the µs per unit a
			// bucket's retry is told early by, for its rounding.
			soonest := first.RetryAfter
			if alg != ratelimit.FixedWindow && alg != ratelimit.SlidingWindow && !keys {
				soonest += period - time.Microsecond
			}
			e.check(second.RetryAfter >= soonest, "%s: the second waiter is told %s, before it could be admitted (%s)", l.name, second.RetryAfter, soonest)
			waiting("two wait", 2)
			_, none := turn("a call that may wait 1ms", 0, time.Millisecond)
			e.check(none == 0, "%s: a call denied beyond its wait got a place", l.name)

			e.advance(first.RetryAfter) // a unit is free; the first waiter has yet to come
			d, again := turn("the second waiter, back", t2, hour)
			e.check(!d.Allowed && d.Source == ratelimit.SourceQueue && again == t2, "%s: the second waiter overtook the first: %+v (ticket %d)", l.name, d, again)
			e.check(d.RetryAfter > 0 && d.RetryAfter <= period, "%s: told to come back %s, after it could be admitted (a period, once the first, due now, took its unit)", l.name, d.RetryAfter)
			p = peek("a new call's")
			d, t3 := turn("a new call", 0, hour)
			e.check(p == d, "%s: Rule.Peek of a rule with Wait tells %+v, a new call is told %+v", l.name, p, d)
			e.check(!d.Allowed && d.Source == ratelimit.SourceQueue && t3 > t2, "%s: a new call overtook the waiters: %+v (ticket %d)", l.name, d, t3)
			d, held := turn("the first waiter, back", t1, hour)
			e.check(d.Allowed && held == 0, "%s: the first waiter, first and with a unit free, was not admitted: %+v (held %d)", l.name, d, held)

			waiting("the first waiter admitted", 2)
			e.check(q.Dequeue(e.ctx, req, t2) == nil && q.Dequeue(e.ctx, req, t3) == nil, "%s: Dequeue", l.name)
			waiting("the others gave up", 0)
			d, t4 := turn("a call once the queue is empty", 0, hour)
			e.check(!d.Allowed && d.Source != ratelimit.SourceQueue && t4 != 0, "%s: a new call with nobody waiting is decided (denied): %+v", l.name, d)
			e.advance(d.RetryAfter + ratelimit.QueueGrace + time.Millisecond)
			waiting("a place past its grace", 0)
			d, held = turn("a new call after the first waiter's grace", 0, hour)
			e.check(d.Allowed && held == 0, "%s: a place whose caller stayed away past its grace still held the queue: %+v", l.name, d)
			d, held = turn("the waiter that stayed away", t4, hour)
			e.check(!d.Allowed && held != t4 && held > t4, "%s: a waiter that lost its place is placed anew, at the end: %+v (ticket %d)", l.name, d, held)
			e.check(q.Dequeue(e.ctx, req, held) == nil, "%s: Dequeue", l.name)
		}
	})
}

// queuedLimiter records, in the order its backend answered them, the
// tries in turn (OpTurn, OpSlotTurn) it passes to the limiter it wraps,
// one at a time.
type queuedLimiter struct {
	ratelimit.Limiter
	q opCalls

	slot     bool // its calls take a concurrency slot
	mu       sync.Mutex
	admitted []int64             // the tickets of the admitted waiters, in order
	back     map[int64]time.Time // when each ticket may come back, at the soonest
	early    []string            // tries before that
}

func (w *queuedLimiter) AllowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.early = append(w.early, w.earlyTry(ticket)...)
	d, held, at, err := w.q.AllowInTurn(ctx, req, ticket, wait)
	w.note(d, ticket, held, err)
	return d, held, at, err
}

// inOrder checks that every waiter was admitted (errs: what each got),
// from the queue, in the order of the places they took, and that none
// came back before it was told to.
func (w *queuedLimiter) inOrder(e *env, name string, errs []error) {
	for i, err := range errs {
		e.check(err == nil, "%s: waiter %d: %v", name, i, err)
	}
	e.check(len(w.early) == 0, "%s: waiters asked before their retry: %v", name, w.early)
	e.check(len(w.admitted) == len(errs), "%s: %d waiters admitted from the queue, want %d", name, len(w.admitted), len(errs))
	for i := 1; i < len(w.admitted); i++ {
		e.check(w.admitted[i] > w.admitted[i-1], "%s: admitted out of order: %v", name, w.admitted)
	}
}

// placedBeyond returns once more than n calls got a place, or done is
// closed (the call returned without one, which the caller reports), and
// reports whether one did.
func (w *queuedLimiter) placedBeyond(n int, done <-chan struct{}) bool {
	for w.placed() <= n {
		select {
		case <-done:
			return w.placed() > n
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// allClosed reports whether every channel of cs is closed.
func allClosed(cs []chan struct{}) bool {
	for _, c := range cs {
		select {
		case <-c:
		default:
			return false
		}
	}
	return true
}

// earlyTry returns what is wrong with a try of ticket now: nothing, or
// that it came back before it was told to.
func (w *queuedLimiter) earlyTry(ticket int64) []string {
	if at, ok := w.back[ticket]; ok && time.Now().Before(at) {
		return []string{fmt.Sprintf("ticket %d came back %s early", ticket, time.Until(at))}
	}
	return nil
}

// note records the answer to a try of ticket: an admission, or when the
// call may come back. A call denied in its turn for want of a slot may
// come back at once (it polls); one told to wait behind others, not
// before its RetryAfter.
func (w *queuedLimiter) note(d ratelimit.Decision, ticket, held int64, err error) {
	switch {
	case err != nil:
	case d.Allowed && ticket != 0:
		w.admitted = append(w.admitted, ticket)
	case !d.Allowed && held != 0 && (d.Source == ratelimit.SourceQueue || !w.slot):
		w.back[held] = time.Now().Add(d.RetryAfter)
	case !d.Allowed && held != 0:
		w.back[held] = time.Now()
	}
}

func (w *queuedLimiter) ReserveSlotInTurn(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.early = append(w.early, w.earlyTry(ticket)...)
	d, held, at, err := w.q.ReserveSlotInTurn(ctx, req, slot, token, ticket, wait)
	w.note(d, ticket, held, err)
	return d, held, at, err
}

// Do records OpTurn and OpSlotTurn, and passes on the other operations.
func (w *queuedLimiter) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	h := ratelimit.Handlers{Next: w.Limiter, Turn: w.AllowInTurn, SlotTurn: w.ReserveSlotInTurn}
	return h.Do(ctx, w, op)
}

// placed returns how many calls got a place so far.
func (w *queuedLimiter) placed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.back)
}

// queueOrder: on each limiter in turn, in real time, waiters that began
// to wait one after another (with Rule.Check, or Rule.Reserve when way
// is "reserve") on a key of alg whose units are used up are admitted in
// that order, each one unit later; none asks again before the RetryAfter
// it was told; a Rule.Peek while they wait tells the denial behind them;
// and the queue is empty after them.
func (s *suite) queueOrder(t *testing.T, alg ratelimit.Algorithm, way string) {
	if way == "reserve" {
		need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	}
	const waiters = 6
	period := 40 * time.Millisecond
	if !s.b.Clock {
		period = 250 * time.Millisecond
	}
	r := &ratelimit.Rule{Name: "queue/order/" + string(alg), Limits: turnLimits(alg, period, false), Wait: time.Minute}
	now := &ratelimit.Rule{Name: r.Name, Limits: r.Limits} // the same calls, without waiting
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			q, _ := queueOf(l.limiter)
			w := &queuedLimiter{Limiter: l.limiter, q: q, back: map[int64]time.Time{}}
			var errs [waiters]error
			var peeked ratelimit.Decision
			var peekErr error
			var waited, turned bool
			e.whileRunning(func() {
				for now.Check(e.ctx, w, 1, l.name) == nil { // use the key's units up
				}
				var wg sync.WaitGroup
				var dones []chan struct{}
				for i := range waiters {
					placed, done := w.placed(), make(chan struct{})
					dones = append(dones, done)
					wg.Go(func() {
						defer close(done)
						if way == "reserve" {
							_, errs[i] = r.Reserve(e.ctx, w, 1, l.name)
						} else {
							errs[i] = r.Check(e.ctx, w, 1, l.name)
						}
					})
					if !w.placedBeyond(placed, done) && errs[i] == nil && allClosed(dones) {
						// Admitted at once, with no one waiting ahead of it: the
						// key's units came back before it called (a slow machine
						// let the window turn), so the run tells nothing.
						turned = true
						break
					}
				}
				if turned {
					wg.Wait()
					return
				}
				peeked, peekErr = r.Peek(e.ctx, w, l.name)
				w.mu.Lock()
				waited = len(w.admitted) < waiters // one still held its place after the peek
				w.mu.Unlock()
				wg.Wait()
			})
			if turned {
				e.rerun("%s: a waiter was admitted at once, with no one waiting ahead of it: the window turned while the key's units were used up", l.name)
			}
			w.inOrder(e, l.name, errs[:])
			e.check(peekErr == nil && (!waited || !peeked.Allowed && peeked.Source == ratelimit.SourceQueue && peeked.RetryAfter > 0),
				"%s: while calls waited, Rule.Peek told %+v, %v; want the denial behind them", l.name, peeked, peekErr)
			d, held, _, err := q.AllowInTurn(e.ctx, ratelimit.Request{Name: r.Name, Key: l.name, Limits: r.Limits, Rule: r}, 0, time.Minute)
			e.check(err == nil && d.Source != ratelimit.SourceQueue, "%s: a call after the waiters found the queue not empty: %+v, %v", l.name, d, err)
			if held != 0 {
				e.check(q.Dequeue(e.ctx, ratelimit.Request{Name: r.Name, Key: l.name, Limits: r.Limits, Rule: r}, held) == nil, "%s: Dequeue", l.name)
			}
		}
	})
}
