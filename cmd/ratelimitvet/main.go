// Ratelimitvet reports the mistakes in //ratelimit: directives, and
// generated code that is missing or stale, the way go vet reports its
// findings.
//
// Install it and run it through go vet:
//
//	go install github.com/ratelimitgen/ratelimitgen/cmd/ratelimitvet@latest
//	go vet -vettool=$(which ratelimitvet) ./...
//
// With a version (@latest, @v1.2.3), go install works anywhere, in a
// module or not. Its analyzer renders what its own version of the
// generator does, so the version your module requires, as go list -m
// github.com/ratelimitgen/ratelimitgen prints it, reports only the files
// go generate would change. Or track it as a tool of the module (go get
// -tool github.com/ratelimitgen/ratelimitgen/cmd/ratelimitvet) and run
// go vet -vettool=$(go tool -n ratelimitvet) ./...
//
// It also runs on its own, as ratelimitvet ./... (it takes the flags of
// any golang.org/x/tools/go/analysis/singlechecker command). A generated
// file of an older version that no longer compiles against the runtime
// (before Rule.Check took the cost before the keys, for one) is reported
// stale with the fix after its compile errors when ratelimitvet runs on
// its own; go vet stops at the compile errors, and go generate fixes them. The analyzer is
// github.com/ratelimitgen/ratelimitgen/analyzer, for golangci-lint and
// other drivers.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/ratelimitgen/ratelimitgen/analyzer"
)

func main() { singlechecker.Main(analyzer.Analyzer) }
