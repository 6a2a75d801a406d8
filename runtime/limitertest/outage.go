package limitertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// outage crosses each error policy with a backend that cannot decide:
// the backend's limiter behind a wrapper whose Allow fails with
// ratelimit.ErrBackend while it is down, as a backend out of reach does.
// FailOpen lets the calls through and FailClosed fails them, charging
// nothing either way (the backend, back, admits what the limit had left);
// FailLocal has them decided by the backend's fallback (ratelimit.OpFallback), never
// more than the limit, or fails them when it has none. With
// Backend.Outage, the same policies are crossed with a real outage (see
// realOutageOf).
func (s *suite) outage(t *testing.T) {
	for _, p := range policies {
		t.Run("onerror="+string(p), func(t *testing.T) { s.outageOf(t, p) })
	}
	for _, p := range policies {
		t.Run("real/onerror="+string(p), func(t *testing.T) { s.realOutageOf(t, p, 1, false) })
	}
	t.Run("real/per_call/onerror=local", func(t *testing.T) { s.realOutageOf(t, ratelimit.FailLocal, perCallCost, false) })
	t.Run("real/settle", func(t *testing.T) { s.settleOutage(t) })
	t.Run("real/shared_line/onerror=local", func(t *testing.T) {
		need(t, "decide shared lines (ratelimit.Abilities.SharesLines)", s.caps.shared)
		s.realOutageOf(t, ratelimit.FailLocal, 1, true)
	})
	t.Run("real/top_denied", func(t *testing.T) { s.topDeniedOutage(t) })
	for _, p := range policies {
		t.Run("real/cooldown/onerror="+string(p), func(t *testing.T) { s.cooldownOutage(t, p) })
	}
}

// perCallCost is the cost of the calls of the real outage of a limit that
// counts calls.
const perCallCost = 3

// policies are the error policies an outage is crossed with.
var policies = []ratelimit.ErrorPolicy{ratelimit.FailOpen, ratelimit.FailClosed, ratelimit.FailLocal}

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
	local := can(l, ratelimit.OpFallback)
	admitted := duringOutage(t, rule, l, p, local, 2*threshold, 1, "k")
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

// duringOutage makes calls calls of cost units of rule of keys on l,
// whose backend is down, and checks that each ends as the policy p says
// (local: l has a fallback); it returns how many the fallback admitted.
func duringOutage(t *testing.T, rule *ratelimit.Rule, l ratelimit.Limiter, p ratelimit.ErrorPolicy, local bool, calls int, cost int64, keys ...string) int {
	t.Helper()
	admitted := 0
	for i := range calls {
		a, err := rule.Admit(context.Background(), l, cost, keys...)
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
	return admitted
}

// realOutageOf is outage's cross of the policy p with a real outage
// (Backend.Outage), on the backend's own clock: a limit of an hour admits
// a call, the backend goes down and the calls of the outage end as p
// says; once it is back, its guards let it decide again within a minute,
// and the limit then admits what it has left: its units less the call
// before the outage (when the backend kept its state) and less what a
// fallback carried back to it (guard.Fallback's Carried), never more.
// Calls of cost above 1 are limited by a limit that counts calls
// (ratelimit.Limit.PerCall) beside one of units that never binds: what the
// fallback admitted is carried back as 1 call each to the first and its
// cost to the second.
// With shared, the limit is a line shared by two rules (Rule.Shared): the
// calls before and during the outage are of one, whose only line it is,
// and those after it of the other, which has a line of its own per user
// beside it; what the fallback admitted is carried back to the line's
// own state.
func (s *suite) realOutageOf(t *testing.T, p ratelimit.ErrorPolicy, cost int64, shared bool) {
	if s.b.Outage == nil {
		t.Skip("limitertest: Backend.Outage is nil: no real outage to cross")
	}
	ctx := context.Background()
	l := s.b.New(t)
	const threshold = 4
	lim := ratelimit.Limit{Period: time.Hour, Threshold: threshold}
	rule := &ratelimit.Rule{Name: "real_outage/" + string(p), Limits: []ratelimit.Limit{lim}, OnError: p}
	if cost > 1 {
		rule.Name += "/per_call"
		rule.Limits = []ratelimit.Limit{{Period: time.Hour, Threshold: threshold, PerCall: true}, {Period: time.Hour, Threshold: 100 * threshold * cost}}
	}
	after, keys, afterKeys := rule, []string{"k"}, []string{"k"}
	if shared {
		line := "real_outage/line"
		rule = &ratelimit.Rule{Name: rule.Name + "/shared", Limits: rule.Limits, KeyExprs: []string{""}, Shared: []string{line}, OnError: p}
		after = &ratelimit.Rule{
			Name:     rule.Name + "/after",
			Limits:   []ratelimit.Limit{{Period: time.Hour, Threshold: 100}, lim},
			KeyExprs: []string{"user", ""},
			Shared:   []string{"", line},
			OnError:  p,
		}
		keys, afterKeys = []string{""}, []string{"k", ""}
	}
	if err := rule.Check(ctx, l, cost, keys...); err != nil {
		t.Fatalf("the first call, before the outage: %v", err)
	}
	restore := s.b.Outage(t)
	local := can(l, ratelimit.OpFallback)
	admitted := int64(duringOutage(t, rule, l, p, local, 2*threshold, cost, keys...))
	if admitted > threshold {
		t.Fatalf("the fallback admitted %d calls of a limit of %d", admitted, threshold)
	}
	restore()
	backAgain(t, after, l)
	carried := int64(0)
	if f, ok := carrier(l); ok {
		// A guard.Breaker lets the backend decide once its probe has
		// carried back what the fallback admitted (see guard.Fallback.Recover).
		if _, breaker := guard.Of[*guard.Breaker](l); breaker && (f.Held() > 0 || f.Recovering()) {
			t.Fatalf("the backend decided a call before the fallback carried back what it admitted (%d admissions held, recovering %v)", f.Held(), f.Recovering())
		}
		units := carriedBack(t, f, admitted*cost)
		if units%cost != 0 {
			t.Fatalf("the fallback carried back %d units of calls of %d units each", units, cost)
		}
		carried = units / cost
	}
	left := int64(0)
	for range threshold + 1 {
		a, err := after.Admit(ctx, l, cost, afterKeys...)
		switch {
		case err == nil && a.Decided && a.Decision.Source == ratelimit.SourceBackend:
			left++
		case !errors.Is(err, ratelimit.ErrLimited):
			t.Fatalf("a call after the outage: %+v, %v; want the backend's decision", a, err)
		}
	}
	if most := threshold - carried; left > most || left < most-1 {
		t.Fatalf("after the outage, the limit of %d admitted %d calls with %d calls carried back: want %d (the backend lost its state) or %d (it kept it)", threshold, left, carried, most, most-1)
	}
}

// carrier returns the guard.Fallback in front of l, when it carries its
// admissions back to the backend (a guard.Carrier).
func carrier(l ratelimit.Limiter) (*guard.Fallback, bool) {
	f, ok := guard.Of[*guard.Fallback](l)
	if !ok {
		return nil, false
	}
	return f, f.Carries()
}

// carriedBack waits, for at most a minute, for f to carry back the units
// its fallback admitted during an outage (every one of them charged, or
// dropped for want of room), and returns the units charged.
func carriedBack(t *testing.T, f *guard.Fallback, admitted int64) int64 {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); f.Recovering() || f.Carrying(); {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the backend decided again, the fallback still holds %d admissions to carry back", f.Held())
		}
		time.Sleep(10 * time.Millisecond)
	}
	charged, dropped := f.Carried()
	t.Logf("the fallback admitted %d units in the outage: %d carried back, %d dropped", admitted, charged, dropped)
	if charged+dropped != admitted {
		t.Fatalf("the fallback admitted %d units in the outage, and carried back %d and dropped %d", admitted, charged, dropped)
	}
	return charged
}

// backAgain waits, for at most a minute, for the backend of l to decide
// calls of rule's limits again once it is back (its breaker closed), asking
// with calls of a rule that fails rather than fall back, each of a fresh
// key.
func backAgain(t *testing.T, rule *ratelimit.Rule, l ratelimit.Limiter) {
	t.Helper()
	probe := &ratelimit.Rule{Name: rule.Name + "/probe", Limits: rule.Limits, OnError: ratelimit.FailClosed}
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		a, err := probe.Admit(context.Background(), l, 0, fmt.Sprint("back-again-", i))
		if err == nil && a.Decided && a.Decision.Source == ratelimit.SourceBackend {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the backend came back, it does not decide: %+v, %v", a, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failing is a limiter whose Allow fails with ratelimit.ErrBackend while
// down, and is next's otherwise; it passes every other operation on to
// next (its fallback's too), and reports next's abilities.
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

func (f *failing) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return f.next.Do(ctx, op)
}

func (f *failing) Abilities() ratelimit.Abilities { return f.next.Abilities() }

func (f *failing) Unwrap() ratelimit.Limiter { return f.next }

// settleOutage: with a real outage (Backend.Outage), a reservation made
// before it and settled at 0 during it, and one refunded during it, fail
// with an error wrapping ratelimit.ErrBackend and stay charged as
// reserved: once the backend is back, the limit admits what the calls
// before the outage left it (or all of it, when the backend lost its
// state), not what a settle would have given back.
func (s *suite) settleOutage(t *testing.T) {
	if s.b.Outage == nil {
		t.Skip("limitertest: Backend.Outage is nil: no real outage to cross")
	}
	need(t, "settle reservations (Rule.Reserve)", s.caps.reserve)
	ctx := context.Background()
	l := s.b.New(t)
	const threshold, reserved = 6, 2
	rule := &ratelimit.Rule{Name: "real_outage/settle", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: threshold}}, OnError: ratelimit.FailClosed}
	settled, err := rule.Reserve(ctx, l, reserved, "k")
	if err != nil {
		t.Fatalf("the reservation to settle, before the outage: %v", err)
	}
	refunded, err := rule.Reserve(ctx, l, reserved, "k")
	if err != nil {
		t.Fatalf("the reservation to refund, before the outage: %v", err)
	}
	if err := rule.Check(ctx, l, 1, "k"); err != nil {
		t.Fatalf("the call before the outage: %v", err)
	}
	restore := s.b.Outage(t)
	if err := settled.Settle(ctx, 0); !errors.Is(err, ratelimit.ErrBackend) {
		t.Fatalf("Settle while the backend is down: got %v, want an error wrapping ErrBackend", err)
	}
	if err := refunded.Refund(ctx); !errors.Is(err, ratelimit.ErrBackend) {
		t.Fatalf("Refund while the backend is down: got %v, want an error wrapping ErrBackend", err)
	}
	restore()
	backAgain(t, rule, l)
	left := 0
	for range threshold + 1 {
		err := rule.Check(ctx, l, 1, "k")
		switch {
		case err == nil:
			left++
		case !errors.Is(err, ratelimit.ErrLimited):
			t.Fatalf("a call after the outage: %v; want the backend's decision", err)
		}
	}
	if kept := threshold - 2*reserved - 1; left != kept && left != threshold {
		t.Fatalf("after a settle and a refund failed in the outage, the limit of %d admitted %d calls: want %d (the backend kept its state, the reservations charged as reserved) or %d (it lost it)", threshold, left, kept, threshold)
	}
}

// cooldownOutage: with a real outage (Backend.Outage), a rule whose line
// was cooled before it cannot read its cooldowns: Rule.Cooldown fails
// with ErrBackend, and calls are decided as the rule's policy says,
// without the cooldown: FailOpen lets them through, FailClosed fails
// them with ErrBackend, and FailLocal has the local fallback decide them
// against its share of the limit (its fallback (ratelimit.OpFallback) keeps no
// cooldowns).
func (s *suite) cooldownOutage(t *testing.T, p ratelimit.ErrorPolicy) {
	if s.b.Outage == nil {
		t.Skip("limitertest: Backend.Outage is nil: no real outage to cross")
	}
	need(t, "keep cooldowns (ratelimit.OpCool)", s.caps.cooldown)
	ctx := context.Background()
	l := s.b.New(t)
	rule := &ratelimit.Rule{Name: "real_outage/cooldown/" + string(p), Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3, Cooldown: true}}, OnError: p}
	if err := rule.Cooldown(ctx, l, 0, "k", time.Hour); err != nil {
		t.Fatalf("Cooldown before the outage: %v", err)
	}
	if err := rule.Check(ctx, l, 1, "k"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("a call of the cooled key before the outage: %v", err)
	}
	restore := s.b.Outage(t)
	defer restore()
	if err := rule.Cooldown(ctx, l, 0, "k", time.Hour); !errors.Is(err, ratelimit.ErrBackend) {
		t.Fatalf("Cooldown while the backend is down: %v, want an error wrapping ErrBackend", err)
	}
	local := can(l, ratelimit.OpFallback)
	err := rule.Check(ctx, l, 1, "k")
	switch {
	case p == ratelimit.FailOpen, p == ratelimit.FailLocal && local:
		if err != nil {
			t.Fatalf("onerror=%s, the cooldown unreadable: %v, want the call decided without it (admitted)", p, err)
		}
	default:
		if !errors.Is(err, ratelimit.ErrBackend) {
			t.Fatalf("onerror=%s: %v, want an error wrapping ErrBackend", p, err)
		}
	}
}
