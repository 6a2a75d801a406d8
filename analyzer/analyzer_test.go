package analyzer_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/ratelimitgen/ratelimitgen/analyzer"
)

// TestAnalyzer runs the analyzer on the module in testdata: directive
// errors where they are, missing and stale generated code, a use of a
// name that only the stale generated code declares (a type error once it
// is generated again), and nothing for a package whose generated code is
// fresh.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, "testdata", analyzer.Analyzer, "./bad", "./missing", "./stale", "./fresh", "./orphan", "./renamed", "./migrated")
}

// TestStaleNamesTheDirective: the stale diagnostic is at the directive
// whose generated code differs, not at the type's first directive
// (issue 19 item 4).
func TestStaleNamesTheDirective(t *testing.T) {
	analysistest.Run(t, "testdata", analyzer.Analyzer, "./stale")
}

// TestStaleSaysKeysChanged: code generated before each directive line had
// its own key= (issue 21 item 2), for lines of which only some have a
// key=, is stale, and the diagnostic says which line changed meaning and
// how to write the old one.
func TestStaleSaysKeysChanged(t *testing.T) {
	analysistest.Run(t, "testdata", analyzer.Analyzer, "./migrated")
}
