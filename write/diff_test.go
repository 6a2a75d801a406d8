package write

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	new := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\n"
	var buf bytes.Buffer
	unifiedDiff(&buf, "x (current)", "x (generated)", []byte(old), []byte(new))
	want := `--- x (current)
+++ x (generated)
@@ -1,10 +1,11 @@
 a
 b
 c
-d
+D
 e
 f
 g
 h
 i
 j
+k
`
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestUnifiedDiffSeparateHunksAndEmptySides(t *testing.T) {
	var lines []string
	for i := range 30 {
		lines = append(lines, strings.Repeat("x", i))
	}
	old := strings.Join(lines, "\n") + "\n"
	changed := append([]string(nil), lines...)
	changed[2], changed[25] = "two", "twenty-five"
	var buf bytes.Buffer
	unifiedDiff(&buf, "a", "b", []byte(old), []byte(strings.Join(changed, "\n")+"\n"))
	if got := strings.Count(buf.String(), "\n@@ "); got != 2 {
		t.Errorf("want 2 hunks, got %d:\n%s", got, buf.String())
	}
	if !strings.Contains(buf.String(), "@@ -1,6 +1,6 @@\n") || !strings.Contains(buf.String(), "@@ -23,7 +23,7 @@\n") {
		t.Errorf("unexpected hunk ranges:\n%s", buf.String())
	}

	buf.Reset()
	unifiedDiff(&buf, "/dev/null", "b", nil, []byte("one\ntwo\n"))
	if want := "--- /dev/null\n+++ b\n@@ -0,0 +1,2 @@\n+one\n+two\n"; buf.String() != want {
		t.Errorf("from empty: got\n%s\nwant\n%s", buf.String(), want)
	}
	buf.Reset()
	unifiedDiff(&buf, "a", "/dev/null", []byte("one\n"), nil)
	if want := "--- a\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"; buf.String() != want {
		t.Errorf("to empty: got\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestDiffLinesIsAMinimalScript checks on random inputs that the edit
// script turns a into b and is as short as a longest common subsequence
// allows.
func TestDiffLinesIsAMinimalScript(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		a, b := randomLines(rng), randomLines(rng)
		edits := diffLines(a, b)
		var gotA, gotB []string
		kept := 0
		for _, e := range edits {
			if e.op != '+' {
				gotA = append(gotA, e.line)
			}
			if e.op != '-' {
				gotB = append(gotB, e.line)
			}
			if e.op == ' ' {
				kept++
			}
		}
		if strings.Join(gotA, "|") != strings.Join(a, "|") || strings.Join(gotB, "|") != strings.Join(b, "|") {
			t.Fatalf("script does not turn %q into %q: %v", a, b, edits)
		}
		if want := lcs(a, b); kept != want {
			t.Fatalf("script keeps %d lines of %q and %q, want %d", kept, a, b, want)
		}
	}
}

func randomLines(rng *rand.Rand) []string {
	lines := make([]string, rng.IntN(12))
	for i := range lines {
		lines[i] = string(rune('a' + rng.IntN(4)))
	}
	return lines
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}
