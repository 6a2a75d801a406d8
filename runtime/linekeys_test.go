package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// perUserAndForEveryoneRule is the example of docs/keys-and-costs.md: 10 per second per user and 1000 per
// hour for everyone.
func perUserAndForEveryoneRule() *Rule {
	return &Rule{
		Name:     "svc.Post",
		Limits:   []Limit{{Period: time.Second, Threshold: 10}, {Period: time.Hour, Threshold: 1000}},
		KeyExprs: []string{"user", ""},
	}
}

func TestKeyPerLinePerUserAndForEveryone(t *testing.T) {
	clock := newManualClock()
	l := NewMemory(WithClock(clock))
	r := perUserAndForEveryoneRule()
	ctx := context.Background()
	admitted := 0
	for u := range 150 {
		user := fmt.Sprint("user", u)
		for c := range 12 {
			err := r.Check(ctx, l, 1, user, "")
			if err == nil {
				admitted++
				continue
			}
			var le *LimitError
			require.ErrorAs(t, err, &le)
			if c >= 10 && admitted < 1000 {
				assert.Equal(t, "user", le.KeyExpr)
				assert.Equal(t, user, le.Key)
				assert.NotContains(t, le.Error(), user)
				assert.Contains(t, le.Error(), "(key=user)")
			} else {
				assert.Equal(t, "", le.KeyExpr, "the global line denies")
				assert.Equal(t, int64(1000), le.Limit.Threshold)
			}
		}
		clock.Advance(time.Second)
	}
	assert.Equal(t, 1000, admitted, "1000 in total, 10 per user and second")
}

// TestKeyPerLineOverridesPerLine: a keyed line takes its key's override
// (positionally), else the rule's override, else the directive's; a global
// line never takes a key's override; a key's block denies the call and
// its unlimited exempts it.
func TestKeyPerLineOverridesPerLine(t *testing.T) {
	ctx := context.Background()
	ov := &StaticOverrides{}
	ov.SetKey("svc.Post", "gold", Limit{Period: time.Second, Threshold: 50}, Limit{Period: time.Hour, Threshold: 7})
	ov.SetKey("svc.Post", "", Limit{Period: time.Second, Threshold: 1}, Limit{Period: time.Hour, Threshold: 1})
	ov.SetKey("svc.Post", "banned", Limit{Algorithm: Block})
	ov.SetKey("svc.Post", "vip", Limit{Algorithm: Unlimited})
	l := NewMemory(WithClock(newManualClock()), WithOverrides(ov))
	r := perUserAndForEveryoneRule()

	limits, from := r.Explain(ctx, l, "gold", "")
	assert.Equal(t, []Limit{{Period: time.Second, Threshold: 50}, {Period: time.Hour, Threshold: 1000}}, limits)
	assert.Equal(t, []string{"key", "directive"}, from, "the global line keeps the directive's, though a key \"\" has an override")
	limits, from = r.Explain(ctx, l, "plain", "")
	assert.Equal(t, r.Limits, limits)
	assert.Equal(t, []string{"directive", "directive"}, from)

	for range 50 {
		require.NoError(t, r.Check(ctx, l, 1, "gold", ""))
	}
	var le *LimitError
	require.ErrorAs(t, r.Check(ctx, l, 1, "gold", ""), &le)
	assert.Equal(t, "user", le.KeyExpr)
	assert.EqualValues(t, 50, le.Limit.Threshold)

	err := r.Check(ctx, l, 1, "banned", "")
	require.ErrorAs(t, err, &le)
	assert.Equal(t, Block, le.Limit.Algorithm)
	assert.Equal(t, "user", le.KeyExpr)
	assert.NotContains(t, err.Error(), "banned")

	d, err := r.Peek(ctx, l, "nobody", "")
	require.NoError(t, err)
	global := d.Remaining
	for range 20 {
		require.NoError(t, r.Check(ctx, l, 1, "vip", ""), "unlimited exempts the call")
	}
	d, err = r.Peek(ctx, l, "nobody", "")
	require.NoError(t, err)
	assert.Equal(t, global, d.Remaining, "an exempt call charges no line")

	// The rule's override replaces the lines no key overrides, positionally.
	ov.SetRule("svc.Post", Limit{Period: time.Second, Threshold: 3})
	limits, from = r.Explain(ctx, l, "plain", "")
	assert.Equal(t, []Limit{{Period: time.Second, Threshold: 3}, {Period: time.Hour, Threshold: 1000}}, limits)
	assert.Equal(t, []string{"rule", "directive"}, from)
	limits, from = r.Explain(ctx, l, "gold", "")
	assert.EqualValues(t, 50, limits[0].Threshold)
	assert.Equal(t, []string{"key", "directive"}, from, "gold's own; the rule's override has no second limit")

	require.ErrorIs(t, r.Check(ctx, l, 1, "one"), ErrInvalidLimit, "one key per limit")
}

// TestKeyPerLineIsAllOrNothing: a call denied by one line charges no
// other, and the denial's RetryAfter is the longest of the denying lines'.
func TestKeyPerLineIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	l := NewMemory(WithClock(clock))
	r := &Rule{Name: "n", Limits: []Limit{{Period: time.Second, Threshold: 1}, {Period: time.Minute, Threshold: 1}, {Period: time.Hour, Threshold: 5}}, KeyExprs: []string{"a", "b", ""}}
	require.NoError(t, r.Check(ctx, l, 1, "x", "y", ""))
	var le *LimitError
	require.ErrorAs(t, r.Check(ctx, l, 1, "x", "y", ""), &le)
	assert.Equal(t, "b", le.KeyExpr, "the minute's retry is the longest")
	assert.Equal(t, time.Minute, le.RetryAfter)
	huge := Limit{Period: time.Hour, Threshold: 1000}
	d, err := Peek(ctx, l, Request{Name: "n", Keys: []string{"other", "other", ""}, Limits: []Limit{huge, huge, r.Limits[2]}})
	require.NoError(t, err)
	assert.EqualValues(t, 4, d.Remaining, "the denied call left the global line as it was")
	// Lines of one key share that key's state per line index.
	require.NoError(t, r.Check(ctx, l, 1, "z", "x", ""), "x's minute line was not charged")
}

// TestKeyPerLineWaits: a denied call with a key per limit waits for
// admission like any other.
func TestKeyPerLineWaits(t *testing.T) {
	ctx := context.Background()
	l := NewMemory()
	r := &Rule{Name: "w", Limits: []Limit{{Period: 20 * time.Millisecond, Threshold: 1}, {Period: time.Hour, Threshold: 100}}, KeyExprs: []string{"u", ""}, Wait: 10 * time.Second}
	for range 3 {
		require.NoError(t, r.Check(ctx, l, 1, "u1", ""))
	}
	d, err := Peek(ctx, l, Request{Name: "w", Keys: []string{"u2", ""}, Limits: []Limit{{Period: time.Hour, Threshold: 1000}, r.Limits[1]}})
	require.NoError(t, err)
	assert.EqualValues(t, 97, d.Remaining, "three admitted, after waiting")
}

// BenchmarkRuleCheckKeyPerLineMemory compares a call of two lines with a key
// each (a user's and the global one) with a call of the same two limits
// sharing one key.
func BenchmarkRuleCheckKeyPerLineMemory(b *testing.B) {
	ctx := context.Background()
	limits := []Limit{{Period: time.Second, Threshold: 1 << 40}, {Period: time.Hour, Threshold: 1 << 40}}
	shared := &Rule{Name: "bench.shared", Limits: limits}
	perLine := &Rule{Name: "bench.lines", Limits: limits, KeyExprs: []string{"user", ""}}
	keys := []string{"user-42", ""}
	b.Run("shared", func(b *testing.B) {
		l := NewMemory()
		for b.Loop() {
			_ = shared.Check(ctx, l, 1, "user-42")
		}
	})
	b.Run("perLine", func(b *testing.B) {
		l := NewMemory()
		for b.Loop() {
			_ = perLine.Check(ctx, l, 1, keys...)
		}
	})
}

// TestKeyPerLineUnderEviction: calls with a key per limit from many
// goroutines, on a memory limiter that keeps few pairs, lock their shards
// in order (no deadlock) and keep the bound.
func TestKeyPerLineUnderEviction(t *testing.T) {
	l := NewMemory(WithMaxKeys(64))
	r := &Rule{Name: "evict", Limits: []Limit{{Period: time.Second, Threshold: 3}, {Period: time.Second, Threshold: 5}, {Period: time.Hour, Threshold: 1 << 30}}, KeyExprs: []string{"user", "tenant", ""}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				keys := []string{fmt.Sprint("u", (i*7+g)%500), fmt.Sprint("t", (i+g)%40), ""}
				if err := r.Check(context.Background(), l, 1, keys...); err != nil && !errors.Is(err, ErrLimited) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Each shard holds 64/shardCount+1 pairs, or the 3 new pairs of one
	// call whose lines all fall in it (see MemoryLimiter).
	assert.LessOrEqual(t, l.Len(), shardCount*max(64/shardCount+1, 3))
}

// TestAdmitKeyPerLineDescribesEveryLine: the admission of a call with a key per
// limit carries every limit and key expression, and the line with the
// fewest units left.
func TestAdmitKeyPerLineDescribesEveryLine(t *testing.T) {
	l := NewMemory(WithClock(newManualClock()))
	r := perUserAndForEveryoneRule()
	a, err := r.Admit(context.Background(), l, 1, "ann", "")
	require.NoError(t, err)
	assert.True(t, a.Decided)
	assert.Equal(t, r.Limits, a.Limits)
	assert.Equal(t, r.KeyExprs, a.KeyExprs)
	assert.Equal(t, 0, a.Decision.LimitIndex)
	assert.EqualValues(t, 9, a.Decision.Remaining)
	assert.Equal(t, r.Limits[0], a.Limit)

	one := &Rule{Name: "svc.One", Limits: r.Limits}
	a, err = one.Admit(context.Background(), l, 1, "ann")
	require.NoError(t, err)
	assert.Nil(t, a.Limits, "a call with one key is described by Limit alone")
	_, err = r.Admit(context.Background(), l, 1, "ann")
	require.ErrorIs(t, err, ErrInvalidLimit, "one key for a rule with a key per limit")
}

// TestExplainKeyPerLineNamesTiers: a keyed limit overridden by its key's tier
// names the tier.
func TestExplainKeyPerLineNamesTiers(t *testing.T) {
	ov := &StaticOverrides{}
	ov.SetTier("svc.Post", "gold", Limit{Period: time.Second, Threshold: 40})
	ov.SetKeyTier("svc.Post", "acme", "gold")
	l := NewMemory(WithOverrides(ov))
	limits, from := perUserAndForEveryoneRule().Explain(context.Background(), l, "acme", "")
	assert.Equal(t, []string{"tier:gold", "directive"}, from)
	assert.EqualValues(t, 40, limits[0].Threshold)
}

// TestCheckTakesNoKeyOneOrOnePerLimit: Check, Admit, Peek, Explain and
// Reserve take no key (every limit keyed by ""), one key for a rule
// without KeyExprs, or a key per limit; any other number of keys fails
// with ErrInvalidLimit and charges nothing (a reservation refunded gives
// all it took back).
func TestCheckTakesNoKeyOneOrOnePerLimit(t *testing.T) {
	ctx := context.Background()
	l := NewMemory(WithClock(newManualClock()))
	lines := perUserAndForEveryoneRule()
	one := &Rule{Name: "svc.One", Limits: []Limit{{Period: time.Hour, Threshold: 1}, {Period: time.Hour, Threshold: 5}}}
	for _, tt := range []struct {
		rule *Rule
		keys []string
	}{
		{lines, []string{"ada"}},
		{lines, []string{"ada", "", "x"}},
		{one, []string{"ada", "bob", "x"}},
	} {
		what := fmt.Sprintf("%s with keys %q", tt.rule.Name, tt.keys)
		require.ErrorIs(t, tt.rule.Check(ctx, l, 1, tt.keys...), ErrInvalidLimit, what)
		_, err := tt.rule.Admit(ctx, l, 1, tt.keys...)
		require.ErrorIs(t, err, ErrInvalidLimit, what)
		_, err = tt.rule.Peek(ctx, l, tt.keys...)
		require.ErrorIs(t, err, ErrInvalidLimit, what)
		_, err = tt.rule.Reserve(ctx, l, 1, tt.keys...)
		require.ErrorIs(t, err, ErrInvalidLimit, what)
		limits, from := tt.rule.Explain(ctx, l, tt.keys...)
		assert.Equal(t, tt.rule.Limits, limits, what)
		assert.Equal(t, []string{"directive", "directive"}, from, what)
	}
	res, err := lines.Reserve(ctx, l, 1, "ada", "")
	require.NoError(t, err, "a reservation with a key per limit")
	require.NoError(t, res.Refund(ctx), "given back")

	// Nothing above charged a limit: the rule without KeyExprs admits one
	// call of "ada" (its first limit's threshold), and no key is "".
	require.NoError(t, one.Check(ctx, l, 1, "ada"))
	require.ErrorIs(t, one.Check(ctx, l, 1, "ada"), ErrLimited)
	require.NoError(t, one.Check(ctx, l, 1))
	require.ErrorIs(t, one.Check(ctx, l, 1, ""), ErrLimited, "no key is the key \"\"")
	// A key per limit of a rule without KeyExprs keys each limit.
	require.NoError(t, one.Check(ctx, l, 1, "bob", "ada"), "limit 0 of bob, limit 1 of ada")
	require.ErrorIs(t, one.Check(ctx, l, 1, "bob", "cy"), ErrLimited, "limit 0 of bob is spent")
	// No key for a rule with KeyExprs is "" for every limit.
	for range 10 {
		require.NoError(t, lines.Check(ctx, l, 1))
	}
	require.ErrorIs(t, lines.Check(ctx, l, 1, "", ""), ErrLimited, "no key is \"\" per limit")
}
