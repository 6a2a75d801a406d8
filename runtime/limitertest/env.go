package limitertest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// newClock returns a clock that moves only when the suite moves it, in
// 2100, after any server's clock: a Redis backend's window keys expire at
// times read from it.
func newClock() *clocktest.Manual {
	c := clocktest.NewManual()
	c.Set(time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC))
	return c
}

// stallLimit is how much more real time than clock time a cross may take
// before a disagreement may come from a Redis key that expired in real
// time (a second after its state's end) while its state still mattered
// on the clock; the cross then runs again.
const stallLimit = 900 * time.Millisecond

// env is the limiters of one run of a cross: the backend's and, when it
// honours the clock, its in-process twin on the same clock.
type env struct {
	ctx   context.Context
	clock *clocktest.Manual // nil without Backend.Clock
	got   ratelimit.Limiter // the backend's
	want  ratelimit.Limiter // the twin, nil without Backend.Clock
	began time.Time         // real
	from  time.Time         // the clock's, when the run began
	step  int               // the calls so far, for messages
	fault string            // why the run failed, once it did
	// again says the run's precondition did not hold (see rerun): it is
	// run again on fresh limiters.
	again bool
	// gotHook and wantHook count what each limiter reports to its hook,
	// in a run of runHooked.
	gotHook, wantHook *limitmetrics.Metrics
}

// differential reports whether the run compares the backend with its twin.
func (e *env) differential() bool { return e.want != nil }

// lag returns how much more real time than clock time has passed.
func (e *env) lag() time.Duration {
	if e.clock == nil {
		return 0
	}
	return time.Since(e.began) - e.clock.Now().Sub(e.from)
}

// fatalf ends the run as failed. It must be called from the run's own
// goroutine (see suite.run).
func (e *env) fatalf(format string, args ...any) {
	e.fault = fmt.Sprintf("step %d: ", e.step) + fmt.Sprintf(format, args...)
	if e.clock != nil {
		e.fault += fmt.Sprintf(" (clock at %s)", e.clock.Now().Format(time.RFC3339Nano))
	}
	runtime.Goexit()
}

// rerun ends the run as one that tells nothing, to be run again on fresh
// limiters (within runEnv's deadline): what it set up did not hold when
// it was used, as a slow machine can make a short window turn.
func (e *env) rerun(format string, args ...any) {
	e.again = true
	e.fatalf(format, args...)
}

// check ends the run as failed unless ok.
func (e *env) check(ok bool, format string, args ...any) {
	if !ok {
		e.fatalf(format, args...)
	}
}

// advance moves the clock on by d, when there is one.
func (e *env) advance(d time.Duration) {
	if e.clock != nil {
		e.clock.Advance(d)
	}
}

// run runs the cross f on fresh limiters made with opts, on a fresh clock
// when the backend honours one, until a run passes or fails without
// having stalled (see stallLimit), for at most two minutes.
func (s *suite) run(t *testing.T, f func(e *env), opts ...ratelimit.Option) {
	t.Helper()
	s.runEnv(t, f, func() *env { return s.newEnv(t, opts, false) })
}

// runHooked is run with each limiter reporting to a Metrics of its own
// (env.gotHook and env.wantHook).
func (s *suite) runHooked(t *testing.T, f func(e *env)) {
	t.Helper()
	s.runEnv(t, f, func() *env { return s.newEnv(t, nil, true) })
}

// runEnv runs f on the envs newEnv makes, as run describes.
func (s *suite) runEnv(t *testing.T, f func(e *env), newEnv func() *env) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 1; ; attempt++ {
		e := newEnv()
		done := make(chan struct{})
		go func() {
			defer close(done)
			f(e)
		}()
		<-done
		switch {
		case e.fault == "":
			return
		case e.lag() > stallLimit && time.Now().Before(deadline):
			t.Logf("run %d stalled %s beyond the clock; running it again on fresh limiters: %s", attempt, e.lag(), e.fault)
		case e.again && time.Now().Before(deadline):
			t.Logf("run %d tells nothing; running it again on fresh limiters: %s", attempt, e.fault)
		default:
			t.Fatal(e.fault)
		}
	}
}

// newEnv makes the limiters of one run, with hooks of their own when
// hooked.
func (s *suite) newEnv(t *testing.T, opts []ratelimit.Option, hooked bool) *env {
	// A backend that paces an admitted call for hours fails, not hangs.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e := &env{ctx: ctx, began: time.Now()}
	if s.b.Clock {
		e.clock = newClock()
		e.from = e.clock.Now()
		opts = append([]ratelimit.Option{ratelimit.WithClock(e.clock)}, opts...)
	}
	gotOpts, wantOpts := opts, opts
	if hooked {
		e.gotHook, e.wantHook = &limitmetrics.Metrics{}, &limitmetrics.Metrics{}
		gotOpts = append(opts[:len(opts):len(opts)], ratelimit.WithHook(e.gotHook))
		wantOpts = append(opts[:len(opts):len(opts)], ratelimit.WithHook(e.wantHook))
	}
	e.got = s.b.New(t, gotOpts...)
	if s.b.Clock {
		e.want = ratelimit.NewMemory(wantOpts...)
	}
	return e
}

// outcome is what the suite compares of a call's result.
type outcome struct {
	Err      string // "" when admitted, else the error's class (see errClass)
	Decision ratelimit.Decision
	Decided  bool            // Admission.Decided
	Limit    ratelimit.Limit // Admission.Limit
	Denial   ratelimit.LimitError
}

// outcomeOf returns the outcome of a call of Rule.Admit (or of any call
// returning an error, with a zero Admission).
func outcomeOf(a ratelimit.Admission, err error) outcome {
	o := outcome{Decision: sameSource(a.Decision), Decided: a.Decided, Limit: a.Limit}
	if err == nil {
		return o
	}
	o.Err = errClass(err)
	var le *ratelimit.LimitError
	if errors.As(err, &le) {
		o.Denial = *le
		if o.Denial.Source == ratelimit.SourceCache {
			o.Denial.Source = ratelimit.SourceBackend // as sameSource
		}
	}
	return o
}

// decisionOutcome returns the outcome of a call of Limiter.Allow or Peek.
func decisionOutcome(d ratelimit.Decision, err error) outcome {
	if err != nil {
		return outcome{Err: errClass(err)}
	}
	return outcome{Decision: sameSource(d)}
}

// sameSource counts a deny cache's repeat of a denial as the backend's:
// the twin has no cache, and the decision is the backend's own repeated.
func sameSource(d ratelimit.Decision) ratelimit.Decision {
	if d.Source == ratelimit.SourceCache {
		d.Source = ratelimit.SourceBackend
	}
	return d
}

// errClass names the kind of err, which both limiters must agree on.
func errClass(err error) string {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "context: " + err.Error()
	case errors.Is(err, ratelimit.ErrLimited):
		return "limited"
	case errors.Is(err, errors.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, ratelimit.ErrInvalidLimit):
		return "invalid"
	case errors.Is(err, ratelimit.ErrBackend):
		return "backend: " + err.Error()
	}
	return "error: " + err.Error()
}

// same runs call on the backend's limiter and, in a differential run, on
// the twin, requires the same outcome of both, and returns the backend's.
// what describes the call in a failure's message.
func (e *env) same(what string, call func(l ratelimit.Limiter, twin bool) outcome) outcome {
	e.step++
	got := call(e.got, false)
	if e.differential() {
		want := call(e.want, true)
		e.check(got == want, "%s:\n backend %+v\n    twin %+v", what, got, want)
	}
	return got
}

// allow decides req on both limiters.
func (e *env) allow(req ratelimit.Request) outcome {
	return e.same(fmt.Sprintf("Allow(%+v)", req), func(l ratelimit.Limiter, _ bool) outcome {
		return decisionOutcome(l.Allow(e.ctx, req))
	})
}

// admit is Rule.Admit of key, or of keys when not nil, of r on both
// limiters.
func (e *env) admit(r *ratelimit.Rule, key string, keys []string, cost int64) outcome {
	what := fmt.Sprintf("%s Admit(key %q, keys %q, cost %d)", r.Name, key, keys, cost)
	return e.same(what, func(l ratelimit.Limiter, _ bool) outcome {
		if keys != nil {
			return outcomeOf(r.Admit(e.ctx, l, cost, keys...))
		}
		return outcomeOf(r.Admit(e.ctx, l, cost, key))
	})
}

// admitKeys is Rule.Admit of keys (one, or one per limit) of r on both
// limiters.
func (e *env) admitKeys(r *ratelimit.Rule, keys []string, cost int64) outcome {
	return e.same(fmt.Sprintf("%s Admit(keys %q, cost %d)", r.Name, keys, cost), func(l ratelimit.Limiter, _ bool) outcome {
		return outcomeOf(r.Admit(e.ctx, l, cost, keys...))
	})
}

// explain requires Rule.Explain of keys of r to tell the same limits and
// sources on both limiters.
func (e *env) explain(r *ratelimit.Rule, keys []string) {
	e.step++
	limits, from := r.Explain(e.ctx, e.got, keys...)
	e.check(len(limits) > 0 && len(from) == len(limits), "%s Explain(%q): %d limits, %d sources", r.Name, keys, len(limits), len(from))
	if e.differential() {
		wantLimits, wantFrom := r.Explain(e.ctx, e.want, keys...)
		e.check(fmt.Sprint(limits, from) == fmt.Sprint(wantLimits, wantFrom), "%s Explain(%q):\n backend %v %q\n    twin %v %q", r.Name, keys, limits, from, wantLimits, wantFrom)
	}
}

// peek is Rule.Peek of key, or of keys when not nil, of r on both limiters.
func (e *env) peek(r *ratelimit.Rule, key string, keys []string) outcome {
	what := fmt.Sprintf("%s Peek(key %q, keys %q)", r.Name, key, keys)
	return e.same(what, func(l ratelimit.Limiter, _ bool) outcome {
		if keys != nil {
			return decisionOutcome(r.Peek(e.ctx, l, keys...))
		}
		return decisionOutcome(r.Peek(e.ctx, l, key))
	})
}

// reset is ratelimit.Reset of name and key on both limiters.
func (e *env) reset(name, key string) {
	e.same(fmt.Sprintf("Reset(%q, %q)", name, key), func(l ratelimit.Limiter, _ bool) outcome {
		return decisionOutcome(ratelimit.Decision{}, resetKey(e.ctx, l, name, key))
	})
}

// reservations are the reservations one Rule.Reserve made on the
// backend's limiter and on the twin; nil where it was denied.
type reservations struct{ got, want *ratelimit.Reservation }

// reserve is Rule.Reserve of r on both limiters.
func (e *env) reserve(r *ratelimit.Rule, key string, units int64) (outcome, reservations) {
	return e.reserveKeys(r, []string{key}, units)
}

// reserveKeys is Rule.Reserve of r with keys on both limiters.
func (e *env) reserveKeys(r *ratelimit.Rule, keys []string, units int64) (outcome, reservations) {
	var res reservations
	o := e.same(fmt.Sprintf("%s Reserve(keys %q, %d units)", r.Name, keys, units), func(l ratelimit.Limiter, twin bool) outcome {
		v, err := r.Reserve(e.ctx, l, units, keys...)
		if twin {
			res.want = v
		} else {
			res.got = v
		}
		return outcomeOf(ratelimit.Admission{}, err)
	})
	return o, res
}

// settle settles both reservations with actual units.
func (e *env) settle(res reservations, actual int64) {
	e.step++
	err := res.got.Settle(e.ctx, actual)
	e.check(err == nil, "Settle(%d): %v", actual, err)
	if res.want != nil {
		e.check(res.want.Settle(e.ctx, actual) == nil, "twin's Settle(%d)", actual)
	}
}

// refund refunds both reservations.
func (e *env) refund(res reservations) {
	e.step++
	err := res.got.Refund(e.ctx)
	e.check(err == nil, "Refund: %v", err)
	if res.want != nil {
		e.check(res.want.Refund(e.ctx) == nil, "twin's Refund")
	}
}

// release releases both reservations' slots.
func (e *env) release(res reservations) {
	e.step++
	err := res.got.Release(e.ctx)
	e.check(err == nil, "Release: %v", err)
	if res.want != nil {
		e.check(res.want.Release(e.ctx) == nil, "twin's Release")
	}
}

// tally counts the outcomes of a sequence, so a cross can require that
// it both admitted and denied calls.
type tally struct{ admitted, denied int }

// add counts o.
func (c *tally) add(o outcome) {
	switch o.Err {
	case "":
		c.admitted++
	case "limited":
		c.denied++
	}
}

// addDecision counts an outcome of Allow.
func (c *tally) addDecision(o outcome) {
	if o.Err != "" {
		return
	}
	if o.Decision.Allowed {
		c.admitted++
	} else {
		c.denied++
	}
}

// both requires that the sequence admitted and denied calls.
func (e *env) both(c tally) {
	e.check(c.admitted > 0 && c.denied > 0, "the sequence should admit and deny calls: %d admitted, %d denied", c.admitted, c.denied)
}

// whileRunning runs f while the clock runs at about real speed (moved on
// every millisecond), for a call that waits in real time; without a clock
// it runs f.
func (e *env) whileRunning(f func()) {
	if e.clock == nil {
		f()
		return
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				e.clock.Advance(now.Sub(last))
				last = now
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
}

// limitError returns the *LimitError err is or wraps, or nil.
func limitError(err error) *ratelimit.LimitError {
	var le *ratelimit.LimitError
	if errors.As(err, &le) {
		return le
	}
	return nil
}
