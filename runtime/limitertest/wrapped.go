package limitertest

import (
	"context"
	"sync"
	"testing"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// wrapped runs the crosses of one algorithm, of concurrency slots,
// queues, cooldowns, denials and outages again with every limiter behind
// a wrapper of the suite's own (written with ratelimit's exported API
// only, as a user's would be), which passes every call on unchanged and
// records its kind: the crosses must pass as they do without it (a
// wrapper changes no decision), and the wrapper must see each operation
// the backend reports that the crosses make (nothing reaches the backend
// past it).
func (s *suite) wrapped(t *testing.T) {
	seen := &seenKinds{kinds: map[string]bool{}}
	inner := s.b
	ws := &suite{b: inner, caps: s.caps}
	ws.b.New = func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
		return &seeing{next: inner.New(t, opts...), seen: seen}
	}
	alg := ratelimit.Algorithms()[0]
	t.Run(string(alg), func(t *testing.T) { ws.algorithm(t, alg) })
	t.Run("concurrency", func(t *testing.T) { ws.concurrency(t) })
	t.Run("outage", func(t *testing.T) { ws.outage(t) })
	t.Run("top_denied", func(t *testing.T) { ws.topDenied(t) })
	t.Run("cooldown", func(t *testing.T) { ws.cooldown(t) })
	t.Run("queue", func(t *testing.T) { ws.queue(t) })
	if t.Failed() {
		return
	}
	a := inner.New(t).Abilities()
	for _, k := range expectedKinds(a, inner.Outage != nil) {
		if !seen.has(k) {
			t.Errorf("the wrapper never saw %s, which the backend reports and the crosses make: it was reached past the wrapper", k)
		}
	}
}

// expectedKinds returns the calls the crosses make of a backend that
// reports a: Allow, and each operation it reports that they make (the
// fallback's with a real outage only; a slot's renewal is left out, as
// the crosses' calls end before a third of a lease).
func expectedKinds(a ratelimit.Abilities, outage bool) []string {
	kinds := []string{"allow"}
	for _, k := range []ratelimit.OpKind{
		ratelimit.OpPlan, ratelimit.OpReserve, ratelimit.OpAdjust, ratelimit.OpPeek, ratelimit.OpReset,
		ratelimit.OpTakeSlot, ratelimit.OpGiveSlot, ratelimit.OpPeekSlot, ratelimit.OpCool, ratelimit.OpCooling,
		ratelimit.OpTurn, ratelimit.OpSlotTurn, ratelimit.OpDequeue, ratelimit.OpWaiting,
		ratelimit.OpCountDenial, ratelimit.OpTopDenied, ratelimit.OpFallback,
	} {
		if a.Can(k) && (k != ratelimit.OpFallback || outage) {
			kinds = append(kinds, k.String())
		}
	}
	return kinds
}

// seeing is the suite's wrapper: it passes every call on unchanged, and
// records the kinds it saw.
type seeing struct {
	next ratelimit.Limiter
	seen *seenKinds
}

// Allow passes req on.
func (w *seeing) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	w.seen.add("allow")
	return w.next.Allow(ctx, req)
}

// Do passes op on (OpPlan too: the plan is the wrapped limiter's, so the
// rule decides through Allow).
func (w *seeing) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	w.seen.add(op.Kind.String())
	return w.next.Do(ctx, op)
}

// Abilities reports the wrapped limiter's.
func (w *seeing) Abilities() ratelimit.Abilities { return w.next.Abilities() }

// Unwrap returns the wrapped limiter, so that guard.Of finds the guards
// behind the wrapper (the outage crosses read what the fallback carried
// back); no call goes through it.
func (w *seeing) Unwrap() ratelimit.Limiter { return w.next }

// seenKinds are the kinds of call the wrappers of a run saw.
type seenKinds struct {
	mu    sync.Mutex
	kinds map[string]bool
}

func (s *seenKinds) add(kind string) {
	s.mu.Lock()
	s.kinds[kind] = true
	s.mu.Unlock()
}

func (s *seenKinds) has(kind string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds[kind]
}
