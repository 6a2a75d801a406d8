package redislimit

import (
	"math"
	"slices"
	"strings"
	"text/template"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// luaAlgorithm is the Lua side of an algorithm: the template file that
// defines its blocks, and the name of the block each step of the scripts
// runs for it ("" where it has nothing to do). Algorithms that share
// their blocks share a file: the buckets all theirs (bucket.lua.tmpl), the
// windows all but their checks (window.lua.tmpl). The scripts compose the blocks:
// decide.lua.tmpl checks, commits and rolls back, refund.lua.tmpl refunds,
// adjust.lua.tmpl settles (see lua/README.md).
type luaAlgorithm struct {
	Algorithm ratelimit.Algorithm
	// Files are the template files under lua/ that define the blocks: the
	// algorithm's own, then those it shares with others.
	Files []string
	// Check decides a call: it reads now, cost, costArg, key, period,
	// threshold and capacity, and sets ok, rem, ret, res and del; in the
	// generic script also its record (rec1..rec3) when it admits.
	Check string
	// Record names the check's record, rec1..rec3 in order, as the
	// commit and rollback of the generic script read it.
	Record string
	// Commit and Rollback keep or undo an admitting check's change.
	Commit, Rollback string
	// LinesRecord puts a committed limit's record in the reply of the
	// generic script with records (see lines.go).
	LinesRecord string
	// Refund takes back a charge from such a record (refund.lua.tmpl).
	Refund string
	// Settle refunds or charges on top of a reservation (adjust.lua.tmpl).
	Settle string
	// Queue sets rest, the units to peek at, and s, the span past the
	// peek's retry before which m units behind others cannot all be
	// admitted (queue.lua.tmpl).
	Queue string
	// LazyClock reports that the check, in a limit's own script on the
	// server's clock, reads the clock itself, only when a window starts,
	// and otherwise the time left from its key's TTL, in whole ms (see
	// "read clock" in window.lua.tmpl).
	LazyClock bool
	// MuldivFromMs is the shortest period (ms) for which a limit's own
	// script needs muldiv, its blocks multiplying past 2^53 from then on:
	// 0 for every period, noMuldiv for none.
	MuldivFromMs int64
}

// noMuldiv is the MuldivFromMs of an algorithm whose blocks never need
// muldiv.
const noMuldiv = math.MaxInt64

// luaAlgorithms has a row per algorithm, in the order the generic scripts
// test the algorithm's name: adding an algorithm adds its Lua file and its
// row.
var luaAlgorithms = []luaAlgorithm{
	{
		Algorithm: ratelimit.SlidingLog, Files: []string{"sliding_log.lua.tmpl", "sliding_log_entries.lua.tmpl", "sliding_log_settle.lua.tmpl"},
		Check: "check sliding_log", Record: "refresh, logged, units",
		Commit: "commit sliding_log", Rollback: "rollback sliding_log",
		LinesRecord: "lines record sliding_log", Refund: "refund sliding_log", Settle: "settle sliding_log",
		Queue: "queue sliding_log", MuldivFromMs: noMuldiv,
	},
	{
		Algorithm: ratelimit.FixedWindow, Files: []string{"fixed_window.lua.tmpl", "window.lua.tmpl"},
		Check: "check fixed_window", Record: "value", Rollback: "rollback window",
		LinesRecord: "lines record window", Refund: "refund window", Settle: "settle window",
		Queue: "queue fixed_window", LazyClock: true, MuldivFromMs: noMuldiv,
	},
	{
		Algorithm: ratelimit.SlidingWindow, Files: []string{"sliding_window.lua.tmpl", "window.lua.tmpl"},
		Check: "check sliding_window", Record: "value", Rollback: "rollback window",
		LinesRecord: "lines record window", Refund: "refund window", Settle: "settle window",
		// A count (below 2^26) times a period of 2^27 ms or more reaches 2^53.
		Queue: "queue sliding_window", LazyClock: true, MuldivFromMs: 1 << 27,
	},
	bucketRow(ratelimit.TokenBucket),
	bucketRow(ratelimit.LeakyBucket),
	bucketRow(ratelimit.GCRA),
}

// bucketRow is the row of a bucket: the three share their blocks.
func bucketRow(alg ratelimit.Algorithm) luaAlgorithm {
	return luaAlgorithm{
		Algorithm: alg, Files: []string{"bucket.lua.tmpl"},
		Check: "check bucket", Record: "newTat, newTatFrac, oldTat", Commit: "commit bucket",
		LinesRecord: "lines record bucket", Refund: "refund bucket", Settle: "settle bucket",
		Queue: "queue bucket", MuldivFromMs: 0,
	}
}

// luaAlgorithmOf returns the row of alg.
func luaAlgorithmOf(alg ratelimit.Algorithm) luaAlgorithm {
	a, ok := luaRow(alg)
	if !ok {
		panic("redislimit: no Lua blocks for algorithm " + string(alg))
	}
	return a
}

// luaRow returns the row of alg, and whether it has one (a concurrency
// limit, or a script of no limit, has none).
func luaRow(alg ratelimit.Algorithm) (luaAlgorithm, bool) {
	for _, a := range luaAlgorithms {
		if a.Algorithm == alg {
			return a, true
		}
	}
	return luaAlgorithm{}, false
}

// luaBranch is one branch of a generic script's test of a limit's
// algorithm: the rows in a row that run the same blocks.
type luaBranch struct {
	// If tests algo for the rows' algorithms; Names lists them.
	If, Names string
	// Blocks are the blocks the branch runs; Record names the rows' record.
	Blocks []string
	Record string
	// all is set on the last branch when every row has a branch: the
	// test needs no If there.
	all bool
}

// luaBranches returns the branches of a test of algo for steps (fields of
// luaAlgorithm: "Check", "Commit", ...), in the rows' order, leaving out
// the rows that have no block for any of them.
func luaBranches(steps []string) []luaBranch {
	var out []luaBranch
	all := true
	for _, a := range luaAlgorithms {
		var blocks []string
		for _, step := range steps {
			if block := a.block(step); block != "" {
				blocks = append(blocks, block)
			}
		}
		if blocks == nil {
			all = false
			continue
		}
		if n := len(out); n > 0 && slices.Equal(out[n-1].Blocks, blocks) {
			out[n-1].If += ` or algo == "` + string(a.Algorithm) + `"`
			out[n-1].Names += ", " + string(a.Algorithm)
			continue
		}
		out = append(out, luaBranch{If: `algo == "` + string(a.Algorithm) + `"`, Names: string(a.Algorithm), Blocks: blocks, Record: a.Record})
	}
	if len(out) > 0 {
		out[len(out)-1].all = all
	}
	return out
}

// block returns the name of a's block for step.
func (a luaAlgorithm) block(step string) string {
	switch step {
	case "Check":
		return a.Check
	case "Commit":
		return a.Commit
	case "Rollback":
		return a.Rollback
	case "LinesRecord":
		return a.LinesRecord
	case "Refund":
		return a.Refund
	case "Settle":
		return a.Settle
	case "Queue":
		return a.Queue
	}
	panic("redislimit: no Lua step " + step)
}

// recordLocals returns the Lua that names the record rec1..rec3 as
// record ("refresh, logged, units") does.
func recordLocals(record string) string {
	recs := make([]string, len(strings.Split(record, ", ")))
	for i := range recs {
		recs[i] = "rec" + string(rune('1'+i))
	}
	return "local " + record + " = " + strings.Join(recs, ", ")
}

// luaDispatch renders the test of algo that runs, for each algorithm,
// its blocks for steps (space-separated fields of luaAlgorithm, such as
// "Commit LinesRecord"), in the rows' order, for d: "if algo == ... then",
// "elseif ...", and "else" for the last branch when every row has a block;
// with bind, each branch first names its record (see recordLocals).
func luaDispatch(t *template.Template, steps string, d scriptData, bind bool) (string, error) {
	branches := luaBranches(strings.Fields(steps))
	var b strings.Builder
	for i, br := range branches {
		switch {
		case i == 0:
			b.WriteString("if " + br.If + " then")
		case i == len(branches)-1 && br.all:
			b.WriteString("\nelse -- " + br.Names)
		default:
			b.WriteString("\nelseif " + br.If + " then")
		}
		if bind {
			b.WriteString(indentLua(2, recordLocals(br.Record)))
		}
		for _, name := range br.Blocks {
			text, err := includeLua(t, name, d)
			if err != nil {
				return "", err
			}
			b.WriteString(indentLua(2, text))
		}
	}
	b.WriteString("\nend")
	return b.String(), nil
}
