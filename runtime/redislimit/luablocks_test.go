package redislimit

import (
	"io/fs"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestEveryAlgorithmHasItsLuaBlocks: each algorithm has one row, its
// check is in its own file (the row's first), and every block its row
// names is in one of the row's files.
func TestEveryAlgorithmHasItsLuaBlocks(t *testing.T) {
	funcs := template.FuncMap{"include": includeLua, "indent": indentLua, "dispatch": luaDispatch}
	for name, f := range luaConstants {
		funcs[name] = f
	}
	rows := map[ratelimit.Algorithm]int{}
	for _, a := range luaAlgorithms {
		rows[a.Algorithm]++
		own, err := template.New("").Funcs(funcs).ParseFS(luaFiles, "lua/"+a.Files[0])
		require.NoError(t, err, a.Files[0])
		assert.NotNil(t, own.Lookup(a.Check), "%s: %s is not in %s", a.Algorithm, a.Check, a.Files[0])
		var files []string
		for _, f := range a.Files {
			files = append(files, "lua/"+f)
		}
		all, err := template.New("").Funcs(funcs).ParseFS(luaFiles, files...)
		require.NoError(t, err, a.Algorithm)
		for _, step := range []string{"Check", "Commit", "Rollback", "LinesRecord", "Refund", "Settle", "Queue"} {
			if block := a.block(step); block != "" {
				assert.NotNil(t, all.Lookup(block), "%s: %s is not in %v", a.Algorithm, block, a.Files)
			}
		}
		assert.NotEmpty(t, a.Check, a.Algorithm)
		assert.NotEmpty(t, a.Settle, a.Algorithm)
		assert.NotEmpty(t, a.Queue, a.Algorithm)
	}
	for _, alg := range ratelimit.Algorithms() {
		assert.Equal(t, 1, rows[alg], "rows of %s", alg)
	}
	assert.Len(t, rows, len(ratelimit.Algorithms()))
}

// TestLuaDispatchTestsEachAlgorithmOnce: a generic script's test of the
// algorithm has a branch per run of rows with the same blocks, and an
// else only when every row has one.
func TestLuaDispatchTestsEachAlgorithmOnce(t *testing.T) {
	check := luaBranches([]string{"Check"})
	require.Len(t, check, 4)
	assert.Equal(t, `algo == "token_bucket" or algo == "leaky_bucket" or algo == "gcra"`, check[3].If)
	assert.True(t, check[3].all)
	rollback := luaBranches([]string{"Rollback"})
	require.Len(t, rollback, 2)
	assert.Equal(t, `algo == "fixed_window" or algo == "sliding_window"`, rollback[1].If)
	assert.False(t, rollback[1].all, "the buckets have no rollback")

	text, err := luaDispatch(luaTemplates, "Rollback", scriptData{Generic: true}, true)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(text, `if algo == "sliding_log" then`+"\n  local refresh, logged, units = rec1, rec2, rec3"), text)
	assert.NotContains(t, text, "\nelse ")
	assert.True(t, strings.HasSuffix(text, "\nend"))
}

// TestNoLuaSourceIsOver300Lines: every template file under lua/ stays
// within 300 lines (issue 36), split along its blocks when it grows.
func TestNoLuaSourceIsOver300Lines(t *testing.T) {
	files, err := fs.Glob(luaFiles, "lua/*.tmpl")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := fs.ReadFile(luaFiles, f)
		require.NoError(t, err)
		assert.LessOrEqual(t, strings.Count(strings.TrimSuffix(string(b), "\n"), "\n")+1, 300, f)
	}
}

// TestLuaRowFactsPerAlgorithm pins what the rows say of each algorithm's
// own script: the windows read the server's clock lazily, so a denial
// they tell may count from the start of the server's millisecond (the
// deny cache's slack); the buckets always need muldiv, a sliding window
// from a period of 2^27 ms, the others never.
func TestLuaRowFactsPerAlgorithm(t *testing.T) {
	own := func(alg ratelimit.Algorithm, period time.Duration) scriptData {
		return scriptData{plan: planOf(ratelimit.Limit{Algorithm: alg, Period: period, Threshold: 10})}
	}
	for _, alg := range ratelimit.Algorithms() {
		window := alg == ratelimit.FixedWindow || alg == ratelimit.SlidingWindow
		assert.Equal(t, window, own(alg, time.Second).LazyClock(), alg)
		slack := guarded{}.DenySlack([]ratelimit.Limit{{Period: time.Second, Threshold: 1}, {Algorithm: alg, Period: time.Second, Threshold: 1}})
		assert.Equal(t, map[bool]time.Duration{true: time.Millisecond}[window], slack, alg)
		bucket := alg != ratelimit.SlidingLog && !window
		assert.Equal(t, bucket, own(alg, time.Second).Muldiv(), alg)
		long := 1 << 27 * time.Millisecond
		assert.Equal(t, bucket || alg == ratelimit.SlidingWindow, own(alg, long).Muldiv(), alg)
		assert.Equal(t, bucket, own(alg, long-time.Millisecond).Muldiv(), alg)
	}
	assert.False(t, scriptData{Generic: true, plan: planOf(ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 1})}.LazyClock())
	assert.True(t, scriptData{}.Muldiv(), "a script of no algorithm's, as before")
	assert.Zero(t, guarded{}.DenySlack([]ratelimit.Limit{{Algorithm: "concurrency", Threshold: 2}}))
}
