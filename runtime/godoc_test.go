package ratelimit

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShortDocFitsOnAScreen: `go doc -short` of the package, what a
// newcomer reads first, stays at most 60 lines (issue 26); a new export
// must earn its line.
func TestShortDocFitsOnAScreen(t *testing.T) {
	out, err := exec.Command("go", "doc", "-short", ".").Output()
	if err != nil {
		t.Skipf("go doc: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n > 60 {
		t.Errorf("go doc -short ./runtime is %d lines, want at most 60:\n%s", n, out)
	}
}
