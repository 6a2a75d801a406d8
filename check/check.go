// Package check is the check stage of ratelimitgen: it loads packages,
// reads their directives (package parser), checks them against the
// package's types and builds the model of the code to generate (package
// model). Every problem is reported at its position in the source.
package check

import (
	"go/ast"
	"go/token"
	"go/types"

	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// Package is one type-checked package, as the check stage needs it: from
// go/packages (Load) or from an analysis pass.
type Package struct {
	// Path, Name and Dir identify the package and its directory.
	Path, Name, Dir string
	Fset            *token.FileSet
	Syntax          []*ast.File
	Types           *types.Package
	Info            *types.Info
	// TypeErrors are the package's type errors. The generated file, which
	// is not loaded, is expected to cause some; see TypeErrors.
	TypeErrors parser.ErrorList
}

// Check checks the directives of p, adding every problem to diags, and
// returns the model of its generated file. A package without directives
// gets a file without decorators: it has no generated file. The type
// errors of p are TypeErrors' to report.
func Check(p *Package, diags *parser.ErrorList) *model.File {
	f := &model.File{PkgPath: p.Path, PkgName: p.Name, Dir: p.Dir, Scope: p.Types.Scope()}
	c := newCollector(p, diags)
	if !c.collect() {
		return f
	}
	c.build(f)
	return f
}
