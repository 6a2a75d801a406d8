// Ratelimitvet reports the mistakes in //ratelimit: directives, and
// generated code that is missing or stale, the way go vet reports its
// findings.
//
// Install it and run it through go vet:
//
//	go install github.com/ratelimitgen/ratelimitgen/cmd/ratelimitvet
//	go vet -vettool=$(which ratelimitvet) ./...
//
// or on its own, as ratelimitvet ./... (it takes the flags of any
// golang.org/x/tools/go/analysis/singlechecker command). The analyzer is
// github.com/ratelimitgen/ratelimitgen/analyzer, for golangci-lint and
// other drivers.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/ratelimitgen/ratelimitgen/analyzer"
)

func main() { singlechecker.Main(analyzer.Analyzer) }
