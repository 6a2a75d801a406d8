package write

import (
	"fmt"
	"io"
	"strings"
)

// edit is one line of an edit script: ' ' kept, '-' deleted, '+' inserted.
type edit struct {
	op   byte
	line string
}

// maxEditDistance bounds the work of the Myers search; beyond it the
// differing middle is shown as replaced outright.
const maxEditDistance = 2000

// diffLines returns an edit script turning a into b. Common leading and
// trailing lines are matched first; the rest is diffed with Myers'
// O((N+M)D) algorithm.
func diffLines(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []edit
	for _, l := range a[:pre] {
		out = append(out, edit{' ', l})
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, edit{' ', l})
	}
	return out
}

// myers finds a shortest edit script. trace[d] keeps the furthest x of
// each diagonal k in [-d-1, d+1] before round d, for backtracking.
func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(a, b)
	}
	max := n + m
	v := make([]int, 2*max+3)
	off := max + 1
	var trace [][]int
	for d := 0; d <= max && d <= maxEditDistance; d++ {
		trace = append(trace, append([]int(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace)
			}
		}
	}
	return replaceAll(a, b)
}

func backtrack(a, b []string, trace [][]int) []edit {
	x, y := len(a), len(b)
	var rev []edit
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d]
		at := func(k int) int { return v[k+d+1] } // v holds diagonals -d-1..d+1
		k := x - y
		prevK := k - 1
		if k == -d || k != d && at(k-1) < at(k+1) {
			prevK = k + 1
		}
		prevX := at(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x, y = x-1, y-1
			rev = append(rev, edit{' ', a[x]})
		}
		if d > 0 {
			if x == prevX {
				rev = append(rev, edit{'+', b[prevY]})
			} else {
				rev = append(rev, edit{'-', a[prevX]})
			}
		}
		x, y = prevX, prevY
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

func replaceAll(a, b []string) []edit {
	out := make([]edit, 0, len(a)+len(b))
	for _, l := range a {
		out = append(out, edit{'-', l})
	}
	for _, l := range b {
		out = append(out, edit{'+', l})
	}
	return out
}

// splitLines splits text into lines without their line feeds.
func splitLines(text []byte) []string {
	if len(text) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
}

// unifiedDiff writes a unified diff with three lines of context from
// oldName to newName.
func unifiedDiff(w io.Writer, oldName, newName string, oldText, newText []byte) {
	fmt.Fprintf(w, "--- %s\n+++ %s\n", oldName, newName)
	edits := diffLines(splitLines(oldText), splitLines(newText))
	const context = 3
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := hunkEnd(edits, i, context)
		writeHunk(w, edits, start, end)
		i = end
	}
}

// hunkEnd returns the end of the hunk whose first change is at i: it
// extends while changes are at most 2*context kept lines apart.
func hunkEnd(edits []edit, i, context int) int {
	last := i
	for j := i; j < len(edits); j++ {
		if edits[j].op != ' ' {
			last = j
		} else if j-last > 2*context {
			break
		}
	}
	return min(last+context+1, len(edits))
}

func writeHunk(w io.Writer, edits []edit, start, end int) {
	oldLine, newLine := 1, 1
	for _, e := range edits[:start] {
		if e.op != '+' {
			oldLine++
		}
		if e.op != '-' {
			newLine++
		}
	}
	var oldCount, newCount int
	for _, e := range edits[start:end] {
		if e.op != '+' {
			oldCount++
		}
		if e.op != '-' {
			newCount++
		}
	}
	fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(oldLine, oldCount), hunkRange(newLine, newCount))
	for _, e := range edits[start:end] {
		fmt.Fprintf(w, "%c%s\n", e.op, e.line)
	}
}

// hunkRange writes a hunk's line range; an empty range names the line
// before it.
func hunkRange(line, count int) string {
	if count == 0 {
		line--
	}
	if count == 1 {
		return fmt.Sprint(line)
	}
	return fmt.Sprintf("%d,%d", line, count)
}
