package ratelimit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapRow matches a row of README.md's file map and captures its first
// cell's names: `memory.go`, or `ttl_test.go`, `window_test.go`.
var mapRow = regexp.MustCompile("(?m)^\\| (`[^|]+`) \\|")

// TestFileMapCoversEveryFile keeps README.md's map of the package true:
// every source file (and the lua folder) has exactly one row, and every
// row names something that exists.
func TestFileMapCoversEveryFile(t *testing.T) {
	text, err := os.ReadFile("README.md")
	require.NoError(t, err)
	rows := map[string]int{}
	for _, m := range mapRow.FindAllStringSubmatch(string(text), -1) {
		for _, name := range strings.Split(m[1], ",") {
			rows[strings.Trim(strings.TrimSpace(name), "`")]++
		}
	}
	sources, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range append(sources, "lua/") {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		assert.Equal(t, 1, rows[f], "README.md's map has %d rows for %s, want 1", rows[f], f)
	}
	for name := range rows {
		matches, err := filepath.Glob(strings.TrimSuffix(name, "/"))
		require.NoError(t, err)
		assert.NotEmpty(t, matches, "README.md's map names %s, which is gone", name)
	}
}
