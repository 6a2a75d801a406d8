package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseDecisionReadsEveryReplyForm decodes each form a decide script
// answers with, and rejects replies no script sends.
func TestParseDecisionReadsEveryReplyForm(t *testing.T) {
	us := time.Microsecond
	valid := []struct {
		name  string
		reply any
		want  Decision
	}{
		{"packed", int64((7<<20+1500)*64 + 20), Decision{Allowed: true, Remaining: 7, ResetAfter: 1500 * us}},
		{"admitted", []any{int64(7), int64(1500), int64(300)}, Decision{Allowed: true, Remaining: 7, ResetAfter: 1500 * us, Delay: 300 * us}},
		{"full", []any{int64(0), int64(2), int64(40), int64(1500), int64(1), int64(0)},
			Decision{Remaining: 2, RetryAfter: 40 * us, ResetAfter: 1500 * us, Limit: 1}},
	}
	for _, c := range valid {
		d, err := parseDecision(c.reply)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, d, c.name)
	}
	for _, bad := range []any{int64(-1), "OK", []any{int64(1)}, []any{int64(1), "x", int64(3)}, []any{1, 2, 3, 4, 5}} {
		_, err := parseDecision(bad)
		var re *replyError
		assert.ErrorAs(t, err, &re, "%#v", bad)
	}
}

// TestLimitsBeyondTheScriptBoundUseTheGenericScript fills the cache of
// single-limit scripts: a new limit is then decided by the generic script,
// correctly, and adds no script to the server.
func TestLimitsBeyondTheScriptBoundUseTheGenericScript(t *testing.T) {
	saved := planScripts.Load()
	t.Cleanup(func() { planScripts.Store(saved) })
	full := make(map[scriptKey]*redis.Script, maxPlanScripts)
	for i := range maxPlanScripts {
		full[scriptKey{plan: plan{Algorithm: FixedWindow, Period: int64(i + 1), Threshold: 1, Capacity: 1}}] = decideScript
	}
	planScripts.Store(&full)

	l := newTestRedis(t)
	c := rdb(t)
	ctx := context.Background()
	p := plan{Algorithm: GCRA, Period: 7_000_000, Threshold: 3, Capacity: 3}
	require.Nil(t, planScript(p))
	require.Nil(t, planBatchScript(p))
	own := redis.NewScript(planSource(scriptKey{plan: p}))
	req := Request{Name: "bound", Limits: []Limit{{Algorithm: GCRA, Period: 7 * time.Second, Threshold: 3}}}
	for i := range 4 {
		assert.Equal(t, i < 3, allow(t, l, req).Allowed, "call %d", i)
	}
	exists, err := c.ScriptExists(ctx, decideScript.Hash(), own.Hash()).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, exists)
}

// TestPackedReplyOfALongerStateIsAnArray: a limit's own script packs a
// reset in the bits its period's state needs; a window whose key still
// holds the state of a longer period (before an override shortened it)
// has a longer reset, which the script sends in an array instead.
func TestPackedReplyOfALongerStateIsAnArray(t *testing.T) {
	l := newTestRedis(t)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow} {
		long := Request{Name: "shortened", Key: string(alg), Limits: []Limit{{Algorithm: alg, Period: time.Hour, Threshold: 1000}}}
		short := long
		short.Limits = []Limit{{Algorithm: alg, Period: time.Second, Threshold: 1000}}
		require.Less(t, scriptData{plan: planOf(short.Limits[0])}.PackScale(), time.Hour.Microseconds())

		first := allow(t, l, long)
		require.True(t, first.Allowed, alg)
		d := allow(t, l, short)
		require.True(t, d.Allowed, alg)
		assert.Greater(t, d.ResetAfter, time.Second, alg)
		assert.LessOrEqual(t, d.ResetAfter, first.ResetAfter, alg)
		assert.Less(t, d.Remaining, int64(1000), alg)
	}
}

// TestPackBitsHoldTheSpanAndRemaining: the bits a script packs reset in
// hold its state's span, and leave the remaining count room below 2^47,
// or the script chooses for each reply.
func TestPackBitsHoldTheSpanAndRemaining(t *testing.T) {
	bitsOf := func(alg Algorithm, period time.Duration, threshold, burst int64) int {
		l := Limit{Algorithm: alg, Period: period, Threshold: threshold, Burst: burst}
		return scriptData{plan: planOf(l)}.PackBits()
	}
	assert.Equal(t, 20, bitsOf(FixedWindow, time.Second, 100, 0))                 // 10^6 µs < 2^20
	assert.Equal(t, 21, bitsOf(SlidingWindow, time.Second, 100, 0))               // two periods
	assert.Equal(t, 20, bitsOf(SlidingLog, time.Second, 1<<27-1, 0))              // 27 bits left for remaining
	assert.Equal(t, 0, bitsOf(SlidingLog, time.Second, 1<<27, 0))                 // no room: chosen per reply
	assert.Equal(t, 14, bitsOf(TokenBucket, time.Second, 100, 1))                 // one token: 10^4 µs
	assert.Equal(t, 0, bitsOf(GCRA, time.Duration(1<<46)*time.Microsecond, 2, 2)) // a span of 2^46 µs
	generic := scriptData{Generic: true, plan: planOf(Limit{Period: time.Second, Threshold: 1})}
	assert.Zero(t, generic.PackBits())
}
