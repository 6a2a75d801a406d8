package ratelimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// retryErr is an upstream's refusal with a retry time.
type retryErr time.Duration

func (e retryErr) Error() string             { return "upstream busy" }
func (e retryErr) RetryAfter() time.Duration { return time.Duration(e) }

func TestRetryAfterOfFindsTheRetryThroughWrapping(t *testing.T) {
	for _, c := range []struct {
		err  error
		want time.Duration
		ok   bool
	}{
		{nil, 0, false},
		{errors.New("plain"), 0, false},
		{retryErr(3 * time.Second), 3 * time.Second, true},
		{fmt.Errorf("call: %w", retryErr(time.Minute)), time.Minute, true},
		{errors.Join(errors.New("other"), fmt.Errorf("x: %w", retryErr(time.Second))), time.Second, true},
		{retryErr(0), 0, false},
		{retryErr(-time.Hour), 0, false},
		{retryErr(1 << 62), ratelimit.MaxCooldown, true},
		{&ratelimit.LimitError{RetryAfter: time.Second}, 0, false}, // a limit further in cools nothing
	} {
		got, ok := ratelimit.RetryAfterOf(c.err)
		if got != c.want || ok != c.ok {
			t.Errorf("retryAfterOf(%v) = %s, %t; want %s, %t", c.err, got, ok, c.want, c.ok)
		}
	}
}

// allowOnly is a limiter that carries out nothing but Allow.
type allowOnly struct{ ratelimit.Limiter }

func (a allowOnly) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return a.Limiter.Allow(ctx, req)
}

func (a allowOnly) Do(_ context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.Unsupported(a, op.Kind)
}

func (allowOnly) Abilities() ratelimit.Abilities { return ratelimit.Abilities{} }

func TestCooldownUnsupportedIsLoggedOnceAndDecidedWithout(t *testing.T) {
	var logs bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	l := allowOnly{ratelimit.NewMemory()}
	r := &ratelimit.Rule{Name: "unsupported", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2, Cooldown: true}}}
	ctx := context.Background()
	if err := r.Cooldown(ctx, l, 0, "k", time.Minute); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Cooldown: %v", err)
	}
	for i := range 2 {
		if err := r.Check(ctx, l, 1, "k"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := r.Check(ctx, l, 1, "k"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("third call: %v", err)
	}
	if n := strings.Count(logs.String(), "cooldown unsupported"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}

func TestCooldownValidation(t *testing.T) {
	ctx := context.Background()
	l := ratelimit.NewMemory()
	r := &ratelimit.Rule{Name: "v", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2}}}
	if err := r.Cooldown(ctx, l, 0, "k", time.Minute); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("Cooldown of a line without cooldown: %v", err)
	}
	if err := r.Cooldown(ctx, l, 3, "k", time.Minute); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("Cooldown of no line: %v", err)
	}
	slot := &ratelimit.Rule{Name: "s", Limits: []ratelimit.Limit{{Algorithm: "concurrency", Threshold: 1, Cooldown: true}}}
	if _, err := slot.Reserve(ctx, l, 1, "k"); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("a concurrency limit with a cooldown: %v", err)
	}
	c := &ratelimit.Rule{Name: "c", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2, Cooldown: true}}}
	for _, d := range []time.Duration{0, -time.Second} {
		if err := c.Cooldown(ctx, l, 0, "k", d); err != nil {
			t.Errorf("Cooldown(%s): %v", d, err)
		}
	}
	if err := c.Check(ctx, l, 1, "k"); err != nil {
		t.Errorf("a cooldown that is not positive cools nothing: %v", err)
	}
}

func TestResetEndsCooldowns(t *testing.T) {
	ctx := context.Background()
	l := ratelimit.NewMemory()
	r := &ratelimit.Rule{Name: "reset", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2, Cooldown: true}}}
	if err := r.Cooldown(ctx, l, 0, "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(ctx, l, 1, "k"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("cooling: %v", err)
	}
	if err := resetKey(ctx, l, "reset", "k"); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(ctx, l, 1, "k"); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
}

// TestACooldownLineNeverCooledDecidesAsWithout: a rule whose lines are
// marked Cooldown, never cooled, makes exactly the decisions of the same
// rule without the mark (feature on vs off), on one clock.
func TestACooldownLineNeverCooledDecidesAsWithout(t *testing.T) {
	ctx := context.Background()
	clock := &stepClock{t: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	on, off := ratelimit.NewMemory(ratelimit.WithClock(clock)), ratelimit.NewMemory(ratelimit.WithClock(clock))
	for _, alg := range ratelimit.Algorithms() {
		if alg == ratelimit.LeakyBucket {
			continue // Admit would sleep its Delay in real time
		}
		limits := []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 5}, {Algorithm: alg, Period: time.Minute, Threshold: 40}}
		cooled := &ratelimit.Rule{Name: "on/" + string(alg), Limits: append([]ratelimit.Limit(nil), limits...)}
		cooled.Limits[0].Cooldown, cooled.Limits[1].Cooldown = true, true
		plain := &ratelimit.Rule{Name: "on/" + string(alg), Limits: limits}
		admitted, denied := 0, 0
		for i := range 400 {
			clock.t = clock.t.Add(time.Duration(i%7) * 37 * time.Millisecond)
			key := []string{"a", "b"}[i%2]
			cost := int64(1 + i%3)
			a1, e1 := cooled.Admit(ctx, on, cost, key)
			a2, e2 := plain.Admit(ctx, off, cost, key)
			a1.Limit.Cooldown = false
			if fmt.Sprint(a1, e1) != fmt.Sprint(a2, e2) {
				t.Fatalf("%s call %d: with cooldown lines %+v, %v; without %+v, %v", alg, i, a1, e1, a2, e2)
			}
			if e1 == nil {
				admitted++
			} else {
				denied++
			}
		}
		if admitted == 0 || denied == 0 {
			t.Fatalf("%s: %d admitted, %d denied: the sequence should do both", alg, admitted, denied)
		}
	}
}

// stepClock is a clock the test moves.
type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

// resetKey clears the state of name and key on l (OpReset).
func resetKey(ctx context.Context, l ratelimit.Limiter, name, key string) error {
	_, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpReset, Request: ratelimit.Request{Name: name, Key: key}})
	return err
}
