package redislimit

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestParseDecisionReadsEveryReplyForm decodes a decision as every script
// replies it, the array or the packed integer, and rejects replies no
// script sends.
func TestParseDecisionReadsEveryReplyForm(t *testing.T) {
	us := time.Microsecond
	valid := []struct {
		name  string
		reply any
		want  ratelimit.Decision
	}{
		{"packed", int64((7<<20+1500)*64 + 20), ratelimit.Decision{Allowed: true, Remaining: 7, ResetAfter: 1500 * us}},
		{"admitted", []any{int64(1), int64(7), int64(0), int64(1500), int64(0), int64(300)},
			ratelimit.Decision{Allowed: true, Remaining: 7, ResetAfter: 1500 * us, Delay: 300 * us}},
		{"full", []any{int64(0), int64(2), int64(40), int64(1500), int64(1), int64(0)},
			ratelimit.Decision{Remaining: 2, RetryAfter: 40 * us, ResetAfter: 1500 * us, LimitIndex: 1}},
	}
	for _, c := range valid {
		d, err := parseDecision(c.reply)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, d, c.name)
	}
	for _, bad := range []any{int64(-1), "OK", []any{int64(1)}, []any{int64(1), "x", int64(3)}, []any{1, 2, 3, 4, 5}, []any{int64(7), int64(1500), int64(300)}} {
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
		full[scriptKey{plan: plan{Algorithm: ratelimit.FixedWindow, Period: int64(i + 1), Threshold: 1, Capacity: 1}}] = decideScript
	}
	planScripts.Store(&full)

	l := newTestRedis(t)
	c := rdb(t)
	ctx := context.Background()
	p := plan{Algorithm: ratelimit.GCRA, Period: 7_000_000, Threshold: 3, Capacity: 3}
	require.Nil(t, planScript(p))
	require.Nil(t, planBatchScript(p))
	own := redis.NewScript(planSource(scriptKey{plan: p}))
	req := ratelimit.Request{Name: "bound", Limits: []ratelimit.Limit{{Algorithm: ratelimit.GCRA, Period: 7 * time.Second, Threshold: 3}}}
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
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		long := ratelimit.Request{Name: "shortened", Key: string(alg), Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 1000}}}
		short := long
		short.Limits = []ratelimit.Limit{{Algorithm: alg, Period: time.Second, Threshold: 1000}}
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
	bitsOf := func(alg ratelimit.Algorithm, period time.Duration, threshold, burst int64) int {
		l := ratelimit.Limit{Algorithm: alg, Period: period, Threshold: threshold, Burst: burst}
		return scriptData{plan: planOf(l)}.PackBits()
	}
	assert.Equal(t, 20, bitsOf(ratelimit.FixedWindow, time.Second, 100, 0))                 // 10^6 µs < 2^20
	assert.Equal(t, 21, bitsOf(ratelimit.SlidingWindow, time.Second, 100, 0))               // two periods
	assert.Equal(t, 20, bitsOf(ratelimit.SlidingLog, time.Second, 1<<27-1, 0))              // 27 bits left for remaining
	assert.Equal(t, 0, bitsOf(ratelimit.SlidingLog, time.Second, 1<<27, 0))                 // no room: chosen per reply
	assert.Equal(t, 14, bitsOf(ratelimit.TokenBucket, time.Second, 100, 1))                 // one token: 10^4 µs
	assert.Equal(t, 0, bitsOf(ratelimit.GCRA, time.Duration(1<<46)*time.Microsecond, 2, 2)) // a span of 2^46 µs
	generic := scriptData{Generic: true, plan: planOf(ratelimit.Limit{Period: time.Second, Threshold: 1})}
	assert.Zero(t, generic.PackBits())
}

var updateScripts = flag.Bool("update", false, "rewrite the rendered scripts under testdata/scripts")

// scriptShape is one shape of decide script (see lua/README.md) with the
// limit it is rendered for.
type scriptShape struct {
	name    string
	lim     ratelimit.Limit
	generic bool // the generic script; else the limit's own
	clocked bool // the time in ARGV
	batch   bool
	lines   bool // the generic script with records, or with batch the refund script
}

// scriptShapes returns every shape a script can take: the generic script
// and its batch, and for each algorithm its own script on the server's
// clock and on a clock passed in, a sliding window whose period needs
// muldiv, a sliding log whose packed reply is chosen per reply, and a
// limit's batch.
func scriptShapes() []scriptShape {
	second := ratelimit.Limit{Period: time.Second, Threshold: 100}
	shapes := []scriptShape{
		{name: "generic", lim: second, generic: true},
		{name: "generic_batch", lim: second, generic: true, batch: true},
		{name: "generic_lines", lim: second, generic: true, lines: true},
		{name: "refund", lim: second, generic: true, batch: true, lines: true},
	}
	for _, alg := range ratelimit.Algorithms() {
		lim := second
		lim.Algorithm = alg
		shapes = append(shapes,
			scriptShape{name: string(alg), lim: lim},
			scriptShape{name: string(alg) + "_clocked", lim: lim, clocked: true},
		)
	}
	return append(shapes,
		scriptShape{name: "sliding_window_muldiv", lim: ratelimit.Limit{Algorithm: ratelimit.SlidingWindow, Period: 1 << 27 * time.Millisecond, Threshold: 100}},
		scriptShape{name: "sliding_log_unpacked", lim: ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Period: time.Second, Threshold: 1 << 27}},
		scriptShape{name: "gcra_batch", lim: ratelimit.Limit{Algorithm: ratelimit.GCRA, Period: time.Second, Threshold: 100}, batch: true},
	)
}

// text renders the shape's script, with its comments: its golden.
func (s scriptShape) text() string {
	switch {
	case s.lines && s.batch:
		return refundText
	case s.lines:
		return linesText
	case s.generic && s.batch:
		return batchText
	case s.generic:
		return decideText
	}
	p := planOf(s.lim)
	p.Clocked = s.clocked
	return planText(scriptKey{plan: p, batch: s.batch})
}

// source is the shape's script as sent to Redis: its text without its
// comment lines.
func (s scriptShape) source() string {
	switch {
	case s.lines && s.batch:
		return sendable(refundText)
	case s.lines:
		return sendable(linesText)
	case s.generic && s.batch:
		return batchSource
	case s.generic:
		return decideSource
	}
	p := planOf(s.lim)
	p.Clocked = s.clocked
	return planSource(scriptKey{plan: p, batch: s.batch})
}

// TestEveryScriptShapeRendersAsGoldenAndDecides renders every shape of
// script, compares it with its text under testdata/scripts (rewritten with
// -update), and runs it as sent to Redis (the golden without its comment
// lines) on the test server: its first call is admitted.
func TestEveryScriptShapeRendersAsGoldenAndDecides(t *testing.T) {
	c := rdb(t)
	ctx := context.Background()
	l := New(c)
	for _, s := range scriptShapes() {
		t.Run(s.name, func(t *testing.T) {
			text := s.text()
			matchesGolden(t, s.name, text)
			src := s.source()
			require.Equal(t, sendable(text), src, "the script sent is the golden without its comment lines")

			req := ratelimit.Request{Name: "shape", Key: s.name, Limits: []ratelimit.Limit{s.lim}}
			keys, args := l.appendCall(nil, nil, &req, "")
			if s.lines {
				// The generic script with records admits and records the
				// call; the refund script takes its charge back.
				res, err := linesScript.Run(ctx, c, keys, args...).Result()
				require.NoError(t, err)
				d, recs, err := parseLines(res, 1)
				require.NoError(t, err)
				require.True(t, d.Allowed)
				require.Len(t, recs, 3)
				if s.batch {
					lim := s.lim
					refundArgs := append([]any{"", 1, "sliding_log", lim.Period.Microseconds(), lim.Threshold, lim.MaxCost()}, recs...)
					n, err := redis.NewScript(src).Run(ctx, c, keys, refundArgs...).Int()
					require.NoError(t, err)
					assert.Equal(t, 1, n)
					assert.Zero(t, c.Exists(ctx, keys...).Val(), "the log's one entry is gone")
				} else {
					_, err := redis.NewScript(src).Run(ctx, c, keys, args...).Result()
					require.NoError(t, err)
				}
				return
			}
			now := time.Now().UnixMicro()
			switch {
			case s.generic && s.batch:
				args = append([]any{1, len(keys), len(args)}, args...)
			case s.batch:
				args = []any{1, 1, now}
			case s.generic:
			case s.clocked:
				args = []any{1, now}
			default:
				args = nil
			}
			res, err := redis.NewScript(src).Run(ctx, c, keys, args...).Result()
			require.NoError(t, err)
			if s.batch {
				replies, ok := res.([]any)
				require.True(t, ok, "%#v", res)
				require.Len(t, replies, 1)
				res = replies[0]
			}
			d, err := parseDecision(res)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(s.lim.Threshold-1), d.Remaining)
		})
	}
}

// matchesGolden compares text, a rendered script, with its golden,
// testdata/scripts/<name>.lua, which -update rewrites.
func matchesGolden(t *testing.T, name, text string) {
	t.Helper()
	file := filepath.Join("testdata", "scripts", name+".lua")
	if *updateScripts {
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run with -update to write it")
	if string(want) != text {
		t.Errorf("the rendered script differs from %s: run with -update, and review the diff", file)
	}
}
