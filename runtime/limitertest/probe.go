package limitertest

import (
	"context"
	"errors"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// capabilities is what a backend can do, as the suite found by asking it
// through the exported API; each missing one says why.
type capabilities struct {
	algorithms map[ratelimit.Algorithm]string // why it does not decide an algorithm (absent: it does)
	calendar   string                         // why it cannot decide calendar periods, or ""
	peek       string                         // why ratelimit.Peek does not reach it, or ""
	reset      string                         // why ratelimit.Reset does not reach it, or ""
	reserve    string                         // why Rule.Reserve cannot settle on it, or ""
	slots      string                         // why it cannot hold concurrency slots, or ""
	overrides  string                         // why it does not apply WithOverrides, or ""
	hooks      string                         // why it does not report to WithHook's hook, or ""
	shared     string                         // why it cannot decide shared lines, or ""
	cooldown   string                         // why it keeps no cooldowns, or ""
}

// probe asks a fresh limiter of b what it can do. These are the only
// places where the suite learns a backend's capabilities, so a change of
// the core's backend contract changes this function alone.
func probe(t *testing.T, b Backend) capabilities {
	t.Helper()
	ctx := context.Background()
	caps := capabilities{algorithms: map[ratelimit.Algorithm]string{}}
	blocked := &ratelimit.StaticOverrides{}
	blocked.SetRule("probe/overrides", ratelimit.Limit{Algorithm: ratelimit.Block})
	metrics := &limitmetrics.Metrics{}
	l := b.New(t, ratelimit.WithOverrides(blocked), ratelimit.WithHook(metrics))
	hour := func(alg ratelimit.Algorithm) []ratelimit.Limit {
		return []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 3}}
	}
	for _, alg := range ratelimit.Algorithms() {
		req := ratelimit.Request{Name: "probe/" + string(alg), Limits: hour(alg)}
		if _, err := l.Allow(ctx, req); err != nil {
			caps.algorithms[alg] = err.Error()
		}
	}
	cal := ratelimit.Request{Name: "probe/calendar", Limits: []ratelimit.Limit{{Calendar: "day", TZ: "Europe/Paris", Threshold: 3}}}
	if _, err := l.Allow(ctx, cal); err != nil {
		caps.calendar = err.Error()
	}
	if _, err := ratelimit.Peek(ctx, l, ratelimit.Request{Name: "probe/peek", Limits: hour(ratelimit.SlidingLog)}); err != nil {
		caps.peek = err.Error()
	}
	if err := resetKey(ctx, l, "probe/reset", ""); err != nil {
		caps.reset = err.Error()
	}
	rate := &ratelimit.Rule{Name: "probe/reserve", Limits: hour(ratelimit.TokenBucket)}
	if res, err := rate.Reserve(ctx, l, 1, ""); err != nil {
		caps.reserve = err.Error()
	} else if err := res.Settle(ctx, 0); err != nil {
		caps.reserve = "Settle: " + err.Error()
	}
	slot := &ratelimit.Rule{Name: "probe/slots", Limits: []ratelimit.Limit{{Algorithm: concurrency, Threshold: 1}}}
	if res, err := slot.Reserve(ctx, l, 1, ""); err != nil {
		caps.slots = err.Error()
	} else if err := res.Release(ctx); err != nil {
		caps.slots = "Release: " + err.Error()
	}
	block := &ratelimit.Rule{Name: "probe/overrides", Limits: hour(ratelimit.SlidingLog)}
	if err := block.Check(ctx, l, 1, ""); !errors.Is(err, ratelimit.ErrLimited) {
		caps.overrides = "a rule that WithOverrides blocks was not denied (does the limiter report the Config of its options in its Abilities?)"
	}
	if !l.Abilities().SharesLines {
		caps.shared = "the limiter's Abilities say no SharesLines"
	}
	cool := &ratelimit.Rule{Name: "probe/cooldown", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3, Cooldown: true}}}
	if err := cool.Cooldown(ctx, l, 0, "", time.Millisecond); err != nil {
		caps.cooldown = err.Error()
	}
	if metrics.Snapshot()["probe/sliding_log"].Allowed == 0 {
		caps.hooks = "an admission was not reported to WithHook's hook"
	}
	return caps
}

// concurrency is the Algorithm of a concurrency limit.
const concurrency = ratelimit.Algorithm("concurrency")

// need skips t when why says the backend lacks what the cross needs.
func need(t *testing.T, what, why string) {
	t.Helper()
	if why != "" {
		t.Skipf("the backend cannot %s: %s", what, why)
	}
}

// needClock skips t when the backend has no controllable clock: the cross
// compares decisions that depend on when each call is made.
func (s *suite) needClock(t *testing.T) {
	t.Helper()
	if !s.b.Clock {
		t.Skip("needs a backend that honours ratelimit.WithClock (Backend.Clock) to compare decisions")
	}
}
