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
	r, req, peekKeys := turnsRequest(alg, period, keys)
	s.run(t, func(e *env) {
		for _, l := range e.limiters() {
			q, _ := queueOf(l.limiter)
			if _, _, _, err := q.AllowInTurn(e.ctx, req, 0, 0); errors.Is(err, errors.ErrUnsupported) {
				continue // it may decline a call it cannot queue: the call waits in its process's order (the wait crosses)
			}
			waiter := r.Clone()
			waiter.Wait = time.Hour
			c := &turnCalls{e: e, l: l, q: q, req: req, waiter: waiter, peekKeys: peekKeys, alg: alg, period: period, keys: keys}
			c.useUnitsUp()
			first, t1, t2 := c.placeWaiters()
			t3 := c.firstInTurn(first, t1, t2)
			c.freePlaces(t2, t3)
		}
	})
}

// turnsRequest returns the rule of a turns run, of one unit a period of
// alg (see turnLimits), with keys per line when keys is set; its call by
// "ada"; and the keys Rule.Peek of it takes.
func turnsRequest(alg ratelimit.Algorithm, period time.Duration, keys bool) (*ratelimit.Rule, ratelimit.Request, []string) {
	r := &ratelimit.Rule{Name: "queue/turns/" + string(alg), Limits: turnLimits(alg, period, keys)}
	req := ratelimit.Request{Name: r.Name, Key: "ada", Limits: r.Limits, Rule: r}
	peekKeys := []string{"ada"}
	if keys {
		r.KeyExprs = []string{"user", ""}
		req.Key, req.Keys = "", []string{"ada", ""}
		peekKeys = req.Keys
	}
	return r, req, peekKeys
}

// turnCalls are the calls of a turns run on one limiter: tries of req in
// turn, Waiting for it, and Rule.Peek of waiter (its rule with Wait), each
// checked to succeed.
type turnCalls struct {
	e        *env
	l        named
	q        opCalls
	req      ratelimit.Request
	waiter   *ratelimit.Rule
	peekKeys []string
	alg      ratelimit.Algorithm
	period   time.Duration
	keys     bool
}

// turn tries req in turn with ticket, waiting at most wait, and returns
// the decision and the ticket of the place it holds. An admitted call
// must be charged at a time, a denied one at none.
func (c *turnCalls) turn(what string, ticket int64, wait time.Duration) (ratelimit.Decision, int64) {
	d, held, at, err := c.q.AllowInTurn(c.e.ctx, c.req, ticket, wait)
	c.e.check(err == nil, "%s: %s: %v", c.l.name, what, err)
	c.e.check(d.Allowed == !at.IsZero(), "%s: %s: admitted %v, charged at %v", c.l.name, what, d.Allowed, at)
	return d, held
}

// waiting checks that Waiting counts want places for req.
func (c *turnCalls) waiting(what string, want int) {
	n, due, err := c.q.Waiting(c.e.ctx, c.req)
	c.e.check(err == nil && n == want && due >= 0, "%s: %s: Waiting says %d (the last due in %s), %v; want %d", c.l.name, what, n, due, err, want)
}

// peek returns what Rule.Peek of the rule with Wait tells.
func (c *turnCalls) peek(what string) ratelimit.Decision {
	d, err := c.waiter.Peek(c.e.ctx, c.l.limiter, c.peekKeys...)
	c.e.check(err == nil, "%s: %s: Rule.Peek: %v", c.l.name, what, err)
	return d
}

// useUnitsUp uses the key's units up with calls that may not wait, none
// of which gets a place; then nobody waits, and Rule.Peek of the rule with
// Wait tells its limits' denial.
func (c *turnCalls) useUnitsUp() {
	for i := 0; ; i++ {
		d, held := c.turn("a call before any waits", 0, 0)
		c.e.check(held == 0, "%s: a call that may not wait got a place", c.l.name)
		if !d.Allowed {
			break
		}
		c.e.check(i < 10, "%s: 10 calls admitted by a limit of 1", c.l.name)
	}
	c.waiting("nobody waits", 0)
	p := c.peek("nobody waits")
	c.e.check(!p.Allowed && p.Source != ratelimit.SourceQueue, "%s: with nobody waiting, Rule.Peek of a rule with Wait is not its limits' denial: %+v", c.l.name, p)
}

// placeWaiters places a first waiter, decided and denied, and a second
// behind it, not decided and told to come back no sooner than two units
// free; both wait, and a call denied beyond its wait gets no place. It
// returns the first waiter's decision and both tickets.
func (c *turnCalls) placeWaiters() (first ratelimit.Decision, t1, t2 int64) {
	first, t1 = c.turn("the first waiter", 0, time.Hour)
	c.e.check(!first.Allowed && t1 != 0 && first.Source != ratelimit.SourceQueue, "%s: the first waiter is decided, denied and gets a place: %+v, ticket %d", c.l.name, first, t1)
	second, t2 := c.turn("the second waiter", 0, time.Hour)
	c.e.check(!second.Allowed && second.Source == ratelimit.SourceQueue && t2 > t1, "%s: the second waiter is not decided and gets a later place: %+v, ticket %d after %d", c.l.name, second, t2, t1)
	soonest := c.secondUnitIn(first.RetryAfter)
	c.e.check(second.RetryAfter >= soonest, "%s: the second waiter is told %s, before it could be admitted (%s)", c.l.name, second.RetryAfter, soonest)
	c.waiting("two wait", 2)
	_, none := c.turn("a call that may wait 1ms", 0, time.Millisecond)
	c.e.check(none == 0, "%s: a call denied beyond its wait got a place", c.l.name)
	return first, t1, t2
}

// secondUnitIn returns the soonest a call behind one of a unit, which
// itself may be admitted in first, may be admitted: a period more for a
// log or a bucket admitting one per period (a window may admit it as its
// next window begins), less the µs per unit a bucket's retry is told
// early by, for its rounding.
func (c *turnCalls) secondUnitIn(first time.Duration) time.Duration {
	if !windowed(c.alg) && !c.keys {
		return first + c.period - time.Microsecond
	}
	return first
}

// firstInTurn frees a unit once the first waiter (ticket t1, told first)
// is due, before it comes back: the second waiter (t2), back first, does
// not take it, nor does a new call, which Rule.Peek foretells exactly,
// and the first waiter, back, does. It returns the new call's ticket.
func (c *turnCalls) firstInTurn(first ratelimit.Decision, t1, t2 int64) (t3 int64) {
	c.e.advance(first.RetryAfter) // a unit is free; the first waiter has yet to come
	d, again := c.turn("the second waiter, back", t2, time.Hour)
	c.e.check(!d.Allowed && d.Source == ratelimit.SourceQueue && again == t2, "%s: the second waiter overtook the first: %+v (ticket %d)", c.l.name, d, again)
	c.e.check(d.RetryAfter > 0 && d.RetryAfter <= c.period, "%s: told to come back %s, after it could be admitted (a period, once the first, due now, took its unit)", c.l.name, d.RetryAfter)
	p := c.peek("a new call's")
	d, t3 = c.turn("a new call", 0, time.Hour)
	c.e.check(p == d, "%s: Rule.Peek of a rule with Wait tells %+v, a new call is told %+v", c.l.name, p, d)
	c.e.check(!d.Allowed && d.Source == ratelimit.SourceQueue && t3 > t2, "%s: a new call overtook the waiters: %+v (ticket %d)", c.l.name, d, t3)
	d, held := c.turn("the first waiter, back", t1, time.Hour)
	c.e.check(d.Allowed && held == 0, "%s: the first waiter, first and with a unit free, was not admitted: %+v (held %d)", c.l.name, d, held)
	return t3
}

// freePlaces frees the places left: the waiters holding t2 and t3 give
// up, so a new call is decided (denied) and placed; when it stays away
// past its due time and QueueGrace, its place no longer holds the queue,
// so the next new call is admitted, and the caller, back, is placed anew
// at the end.
func (c *turnCalls) freePlaces(t2, t3 int64) {
	c.waiting("the first waiter admitted", 2)
	c.e.check(c.q.Dequeue(c.e.ctx, c.req, t2) == nil && c.q.Dequeue(c.e.ctx, c.req, t3) == nil, "%s: Dequeue", c.l.name)
	c.waiting("the others gave up", 0)
	d, t4 := c.turn("a call once the queue is empty", 0, time.Hour)
	c.e.check(!d.Allowed && d.Source != ratelimit.SourceQueue && t4 != 0, "%s: a new call with nobody waiting is decided (denied): %+v", c.l.name, d)
	c.e.advance(d.RetryAfter + ratelimit.QueueGrace + time.Millisecond)
	c.waiting("a place past its grace", 0)
	d, held := c.turn("a new call after the first waiter's grace", 0, time.Hour)
	c.e.check(d.Allowed && held == 0, "%s: a place whose caller stayed away past its grace still held the queue: %+v", c.l.name, d)
	d, held = c.turn("the waiter that stayed away", t4, time.Hour)
	c.e.check(!d.Allowed && held != t4 && held > t4, "%s: a waiter that lost its place is placed anew, at the end: %+v (ticket %d)", c.l.name, d, held)
	c.e.check(c.q.Dequeue(c.e.ctx, c.req, held) == nil, "%s: Dequeue", c.l.name)
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
	return h.Do(ctx, w, &op)
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
