package limitertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// outage crosses each error policy with a backend that cannot decide:
// the backend's limiter behind a wrapper whose Allow fails with
// ratelimit.ErrBackend while it is down, as a backend out of reach does.
// FailOpen lets the calls through and FailClosed fails them, charging
// nothing either way (the backend, back, admits what the limit had left);
// FailLocal has them decided by the backend's ratelimit.Fallback, never
// more than the limit, or fails them when it has none.
func (s *suite) outage(t *testing.T) {
	for _, p := range []ratelimit.ErrorPolicy{ratelimit.FailOpen, ratelimit.FailClosed, ratelimit.FailLocal} {
		t.Run("onerror="+string(p), func(t *testing.T) { s.outageOf(t, p) })
	}
}

// outageOf is outage's cross of the policy p.
func (s *suite) outageOf(t *testing.T, p ratelimit.ErrorPolicy) {
	ctx := context.Background()
	l := &failing{next: s.b.New(t)}
	const threshold = 3
	rule := &ratelimit.Rule{Name: "outage/" + string(p), Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: threshold}}, OnError: p}
	if err := rule.Check(ctx, l, 1, "k"); err != nil {
		t.Fatalf("the first call, before the outage: %v", err)
	}
	l.down.Store(true)
	_, local := ratelimit.As[ratelimit.Fallback](l)
	admitted := 0
	for i := range 2 * threshold {
		a, err := rule.Admit(ctx, l, 1, "k")
		switch {
		case p == ratelimit.FailOpen && err != nil:
			t.Fatalf("call %d of the outage: FailOpen returned %v, want the call let through", i, err)
		case p == ratelimit.FailClosed || p == ratelimit.FailLocal && !local:
			if !errors.Is(err, ratelimit.ErrBackend) {
				t.Fatalf("call %d of the outage: got %v, want an error wrapping ErrBackend", i, err)
			}
		case p == ratelimit.FailLocal && err == nil:
			admitted++
			if a.Decided && a.Decision.Source != ratelimit.SourceFallback {
				t.Fatalf("call %d of the outage: admitted by %s, want the fallback", i, a.Decision.Source)
			}
		case p == ratelimit.FailLocal && !errors.Is(err, ratelimit.ErrLimited):
			t.Fatalf("call %d of the outage: the fallback returned %v, want an admission or a LimitError", i, err)
		}
	}
	if admitted > threshold || local && p == ratelimit.FailLocal && admitted == 0 {
		t.Fatalf("the fallback admitted %d calls of a limit of %d, want 1 (its share is never below 1) to %d", admitted, threshold, threshold)
	}
	l.down.Store(false)
	if p == ratelimit.FailLocal && local {
		return // what the fallback admitted is carried back when it can be
	}
	for i := range threshold - 1 {
		if err := rule.Check(ctx, l, 1, "k"); err != nil {
			t.Fatalf("call %d after the outage: %v; the outage's calls must have charged nothing", i, err)
		}
	}
	if err := rule.Check(ctx, l, 1, "k"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("the call past the limit after the outage: got %v, want a denial", err)
	}
}

// failing is a limiter whose Allow fails with ratelimit.ErrBackend while
// down, and is next's otherwise; the core finds next's other capabilities
// (its Config, its Fallback) through Unwrap.
type failing struct {
	next ratelimit.Limiter
	down atomic.Bool
}

func (f *failing) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if f.down.Load() {
		return ratelimit.Decision{}, &ratelimit.BackendError{Name: req.Name, Err: errors.New("limitertest: the backend is down")}
	}
	return f.next.Allow(ctx, req)
}

func (f *failing) Unwrap() ratelimit.Limiter { return f.next }
