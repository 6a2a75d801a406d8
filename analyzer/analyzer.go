// Package analyzer reports ratelimitgen's diagnostics as a
// golang.org/x/tools/go/analysis Analyzer, so that go vet (through
// cmd/ratelimitvet), golangci-lint and other drivers show them where the
// code is: every directive error at its position, generated code that is
// missing, and generated code that is stale (what ratelimitgen -check
// reports).
package analyzer

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/ratelimitgen/ratelimitgen/check"
	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
	"github.com/ratelimitgen/ratelimitgen/templates"
)

// Analyzer checks the //ratelimit: directives of a package and that its
// generated file is what ratelimitgen would write.
var Analyzer = &analysis.Analyzer{
	Name: "ratelimit",
	Doc: `check //ratelimit: directives and the code ratelimitgen generates from them

Reports every mistake in a directive at its position, as ratelimitgen
does, and a package whose generated file is missing or stale: run
go generate (ratelimitgen) then.`,
	URL: "https://pkg.go.dev/github.com/ratelimitgen/ratelimitgen/analyzer",
	Run: run,
}

func run(pass *analysis.Pass) (any, error) {
	pkg, generated := source(pass)
	if pkg == nil {
		return nil, nil
	}
	var diags parser.ErrorList
	file := check.Check(pkg, &diags)
	for _, e := range diags {
		report(pass, e)
	}
	if len(diags) == 0 {
		checkGenerated(pass, file, generated)
	}
	return nil, nil
}

// source returns the package as ratelimitgen sees it: its files without
// the test files and without the generated one, type-checked again, and
// the generated file's name, or nil when the package has no source file.
func source(pass *analysis.Pass) (*check.Package, string) {
	var files []*ast.File
	var generated string
	for _, f := range pass.Files {
		name := pass.Fset.File(f.FileStart).Name()
		switch {
		case strings.HasSuffix(name, "_test.go"):
		case isGenerated(f):
			generated = name
		default:
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, ""
	}
	if generated == "" {
		generated = ignoredGenerated(pass.IgnoredFiles)
	}
	pkg := &check.Package{
		Path: pass.Pkg.Path(), Name: pass.Pkg.Name(),
		Dir:    filepath.Dir(pass.Fset.File(files[0].FileStart).Name()),
		Fset:   pass.Fset,
		Syntax: files,
		Info: &types.Info{
			Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{},
			Uses: map[*ast.Ident]types.Object{}, Implicits: map[ast.Node]types.Object{},
			Selections: map[*ast.SelectorExpr]*types.Selection{}, Scopes: map[ast.Node]*types.Scope{},
		},
	}
	imports := map[string]*types.Package{}
	for _, p := range pass.Pkg.Imports() {
		imports[p.Path()] = p
	}
	conf := types.Config{
		Importer: importerFunc(func(path string) (*types.Package, error) {
			if path == "unsafe" {
				return types.Unsafe, nil
			}
			if p := imports[path]; p != nil {
				return p, nil
			}
			return nil, fmt.Errorf("%s is not imported by %s", path, pass.Pkg.Path())
		}),
		Error: func(err error) {
			if te, ok := err.(types.Error); ok {
				pkg.TypeErrors.Add(te.Fset.Position(te.Pos), "%s", te.Msg)
			}
		},
		Sizes: pass.TypesSizes,
	}
	pkg.Types, _ = conf.Check(pass.Pkg.Path(), pass.Fset, files, pkg.Info)
	return pkg, generated
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// isGenerated reports whether f starts with model.Header.
func isGenerated(f *ast.File) bool {
	return len(f.Comments) > 0 && f.Comments[0].Pos() == f.FileStart && f.Comments[0].List[0].Text == model.Header
}

// ignoredGenerated returns the file among names that ratelimitgen
// generated (excluded by the build configuration), or "".
func ignoredGenerated(names []string) string {
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err == nil && bytes.HasPrefix(data, []byte(model.Header+"\n")) {
			return name
		}
	}
	return ""
}

// checkGenerated reports a generated file that is missing or is not what
// ratelimitgen writes.
func checkGenerated(pass *analysis.Pass, file *model.File, generated string) {
	if len(file.Decorators) == 0 {
		if generated != "" {
			pass.Reportf(packageClause(pass, generated), "%s is stale: the package has no directives left; run go generate to delete it", filepath.Base(generated))
		}
		return
	}
	at := pos(pass, file.Decorators[0].Pos)
	want, err := templates.Render(file)
	if err != nil {
		pass.Reportf(at, "cannot generate code for package %s: %v", file.PkgPath, err)
		return
	}
	if generated == "" {
		pass.Reportf(at, "missing generated code for %s: run go generate (ratelimitgen)", file.Decorators[0].Type.Obj().Name())
		return
	}
	if got, err := os.ReadFile(generated); err != nil || !bytes.Equal(got, want) {
		pass.Reportf(at, "%s is stale: run go generate (ratelimitgen)", filepath.Base(generated))
	}
}

// packageClause returns the position of the package clause of the file
// called name.
func packageClause(pass *analysis.Pass, name string) token.Pos {
	for _, f := range pass.Files {
		if pass.Fset.File(f.FileStart).Name() == name {
			return f.Package
		}
	}
	return token.NoPos
}

// report reports e, with its notes as related information.
func report(pass *analysis.Pass, e *parser.Error) {
	d := analysis.Diagnostic{Pos: pos(pass, e.Pos), Message: e.Msg}
	for _, n := range e.Notes {
		d.Related = append(d.Related, analysis.RelatedInformation{Pos: pos(pass, n.Pos), Message: n.Msg})
	}
	pass.Report(d)
}

// pos returns the token.Pos of p in one of the package's files.
func pos(pass *analysis.Pass, p token.Position) token.Pos {
	for _, f := range pass.Files {
		tf := pass.Fset.File(f.FileStart)
		if tf.Name() != p.Filename {
			continue
		}
		if p.Line < 1 || p.Line > tf.LineCount() {
			return f.Package
		}
		return tf.LineStart(p.Line) + token.Pos(max(p.Column-1, 0))
	}
	return token.NoPos
}
