// Package check is the check stage of ratelimitgen: it loads packages,
// reads their directives (package parser), checks them against the
// package's types and builds the model of the code to generate (package
// model). Every problem is reported at its position in the source.
package check

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

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
	// TypeErrors are the package's type errors. Stale or missing generated
	// code is expected to cause some; they only matter when a decorated
	// signature is affected.
	TypeErrors parser.ErrorList
}

// Check checks the directives of p, adding every problem to diags, and
// returns the model of its generated file. A package without directives
// gets a file without decorators: it has no generated file.
func Check(p *Package, diags *parser.ErrorList) *model.File {
	f := &model.File{PkgPath: p.Path, PkgName: p.Name, Dir: p.Dir, Scope: p.Types.Scope()}
	c := newCollector(p, diags)
	if !c.collect() {
		return f
	}
	c.build(f)
	c.checkTypeErrors(f)
	return f
}

// checkTypeErrors reports decorated signatures that did not type-check.
// Other type errors are expected: code that uses the generated decorators
// does not compile while the generator runs without them.
func (c *collector) checkTypeErrors(f *model.File) {
	for _, d := range f.Decorators {
		for _, m := range d.Methods {
			if !strings.Contains(types.TypeString(m.Sig, nil), "invalid type") {
				continue
			}
			pos := d.Pos
			if m.Rule != nil {
				pos = m.Rule.Pos
			}
			c.errorf(pos, "cannot generate %s.%s: its signature does not type-check: %s", d.Type.Obj().Name(), m.Name, c.typeErrorOf(d.Type, m.Name))
		}
	}
}

// typeErrorOf returns the message of the type error on the line that
// declares the method, or else the package's first type error.
func (c *collector) typeErrorOf(named *types.Named, method string) string {
	line := -1
	for _, fn := range methodFuncs(named) {
		if fn.Name() == method && fn.Pos().IsValid() {
			line = c.pkg.Fset.Position(fn.Pos()).Line
		}
	}
	msg := ""
	for _, e := range c.pkg.TypeErrors {
		if e.Pos.Line == line {
			return e.Msg
		}
		if msg == "" {
			msg = e.Msg
		}
	}
	return msg
}
