package limitmetrics_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitertest"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// TestMeasuredChangesNoDecision runs the conformance suite on a measured
// in-process limiter: it decides as the limiter it wraps, with every
// capability.
func TestMeasuredChangesNoDecision(t *testing.T) {
	limitertest.Run(t, limitertest.Backend{
		New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
			return limitmetrics.Measure(ratelimit.NewMemory(opts...), func(context.Context, limitmetrics.Measurement) {})
		},
		Clock: true,
	})
}

// recorder keeps the measurements as "call outcome source" counts and
// the units per "line outcome".
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
	units map[string]int64
}

func (r *recorder) observe(_ context.Context, m limitmetrics.Measurement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls, r.units = map[string]int{}, map[string]int64{}
	}
	r.calls[fmt.Sprintf("%s %s %s %s", m.Name, m.Call, m.Outcome, m.Source)]++
	m.EachLine(func(line int, units int64) {
		r.units[fmt.Sprintf("%s %d %s", m.Name, line, m.Outcome)] += units
	})
	if m.Duration <= 0 {
		r.calls["no duration"]++
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestMeasuredEveryPath: plain checks, settle= (Reserve, then Adjust by
// Settle), concurrency= (a slot taken, denied, given back), Peek and a
// reserve are each measured, with the units each line moved; a line is a
// limit's index, the slot the line after the rate limits.
func TestMeasuredEveryPath(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	l := limitmetrics.Measure(ratelimit.NewMemory(), rec.observe)

	plain := &ratelimit.Rule{Name: "plain", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, {Period: time.Hour, Threshold: 7}}}
	require.NoError(t, plain.Check(ctx, l, 3, "k"))
	require.NoError(t, plain.Check(ctx, l, 3, "k"))
	require.ErrorIs(t, plain.Check(ctx, l, 3, "k"), ratelimit.ErrLimited) // line 1 denies: 6 of 7 used
	_, err := plain.Peek(ctx, l, "k")
	require.NoError(t, err)

	settle := &ratelimit.Rule{Name: "tokens", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}}
	res, err := settle.Reserve(ctx, l, 500, "k")
	require.NoError(t, err)
	require.NoError(t, res.Settle(ctx, 120)) // 380 back
	res, err = settle.Reserve(ctx, l, 100, "k")
	require.NoError(t, err)
	require.NoError(t, res.Settle(ctx, 150)) // 50 more

	conc := &ratelimit.Rule{Name: "exports", Limits: []ratelimit.Limit{
		{Period: time.Hour, Threshold: 100}, {Algorithm: "concurrency", Threshold: 1, Period: time.Minute},
	}}
	held, err := conc.Reserve(ctx, l, 2, "k")
	require.NoError(t, err)
	_, err = conc.Reserve(ctx, l, 2, "k")
	require.ErrorIs(t, err, ratelimit.ErrLimited, "the one slot is held")
	require.NoError(t, held.Release(ctx))

	assert.Equal(t, map[string]int{
		"plain allow allowed backend":           2,
		"plain allow limited backend":           1,
		"plain peek allowed backend":            1,
		"tokens reserve allowed backend":        2,
		"tokens adjust refunded backend":        1,
		"tokens adjust added backend":           1,
		"exports reserve_slot allowed backend":  1,
		"exports reserve_slot limited backend":  1,
		"exports release_slot released backend": 1,
	}, rec.calls, keys(rec.calls))
	assert.Equal(t, map[string]int64{
		"plain 0 allowed":    6,
		"plain 1 allowed":    6,
		"plain 1 limited":    3,
		"tokens 0 allowed":   600,
		"tokens 0 refunded":  380,
		"tokens 0 added":     50,
		"exports 0 allowed":  2,
		"exports 1 allowed":  1, // a slot
		"exports 1 limited":  1,
		"exports 1 released": 1,
	}, rec.units, keys(rec.units))
}

// TestMeasuredWaitingCallsSettlesAndCooldowns: the calls of a rule with
// wait= are measured (each try in its turn), a settle moves units only on
// the lines that take a call's cost (not on one that counts calls), and a
// cooldown recorded is measured.
func TestMeasuredWaitingCallsSettlesAndCooldowns(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	l := limitmetrics.Measure(ratelimit.NewMemory(), rec.observe)

	waiting := &ratelimit.Rule{Name: "waiting", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 5}}, Wait: time.Second}
	for range 5 {
		require.NoError(t, waiting.Check(ctx, l, 1, "k"))
	}
	llm := &ratelimit.Rule{Name: "llm", Limits: []ratelimit.Limit{
		{Period: time.Hour, Threshold: 10, PerCall: true}, {Period: time.Hour, Threshold: 10000},
	}}
	for range 3 {
		res, err := llm.Reserve(ctx, l, 2000, "k")
		require.NoError(t, err)
		require.NoError(t, res.Settle(ctx, 500))
	}
	cooled := &ratelimit.Rule{Name: "cooled", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 5, Cooldown: true}}}
	require.NoError(t, cooled.Cooldown(ctx, l, 0, "k", time.Minute))

	assert.Equal(t, 5, rec.calls["waiting turn allowed backend"], keys(rec.calls))
	assert.Equal(t, int64(5), rec.units["waiting 0 allowed"], keys(rec.units))
	assert.Equal(t, 3, rec.calls["llm adjust refunded backend"], keys(rec.calls))
	assert.Equal(t, int64(4500), rec.units["llm 1 refunded"], "the token line gave back 1,500 of each reservation")
	assert.Zero(t, rec.units["llm 0 refunded"], "the request line counts calls: a settle leaves it as it is")
	assert.Equal(t, int64(3), rec.units["llm 0 allowed"], "one call each")
	assert.Equal(t, 1, rec.calls["cooled cool cooled backend"], keys(rec.calls))
}

// offering is an in-process limiter that offers the guards of package
// runtime/guard a value of its own (ratelimit.Abilities.ForGuards).
type offering struct {
	*ratelimit.MemoryLimiter
	offer *struct{ node string }
}

func (o offering) Abilities() ratelimit.Abilities {
	a := o.MemoryLimiter.Abilities()
	a.ForGuards = o.offer
	return a
}

// TestMeasuredPassesOnWhatTheBackendOffersTheGuards: a Measured limiter
// reports the wrapped limiter's abilities, what it offers the guards
// among them, so guards put around it find the backend's probe,
// carry-back and heartbeat as around the backend.
func TestMeasuredPassesOnWhatTheBackendOffersTheGuards(t *testing.T) {
	inner := offering{ratelimit.NewMemory(), &struct{ node string }{"node"}}
	l := limitmetrics.Measure(inner, func(context.Context, limitmetrics.Measurement) {})
	assert.Equal(t, inner.Abilities(), l.Abilities())
	assert.Same(t, inner.offer, l.Abilities().ForGuards)
}
