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
