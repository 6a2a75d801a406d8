// Package analyzer reports ratelimitgen's diagnostics as a
// golang.org/x/tools/go/analysis Analyzer, so that go vet (through
// cmd/ratelimitvet), golangci-lint and other drivers show them where the
// code is: every directive error at its position, generated code that is
// missing, and generated code that is stale (what ratelimitgen -check
// reports), at each directive whose code differs, saying which lines
// changed meaning when the code is from before each directive line had
// its own key=. A package that does
// not type-check is reported by the driver, which runs no analyzer on
// it; the analyzer adds the type errors that only the generated file
// hides, such as a use of a decorator that the directives no longer
// declare.
package analyzer

import (
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	// A generated file of an older version may not compile against this
	// runtime; the analyzer checks the package without it.
	RunDespiteErrors: true,
}

func run(pass *analysis.Pass) (any, error) {
	pkg, generated := source(pass)
	if pkg == nil || !onlyGeneratedIllTyped(pass, generated) {
		return nil, nil // the driver reports the package's own type errors
	}
	var diags parser.ErrorList
	file := check.Check(pkg, &diags)
	if len(file.Decorators) > 0 || len(diags) > 0 {
		// The driver reports the package's own type errors, and runs no
		// analyzer then; these are those of the package without its
		// generated file that generating it would not resolve.
		check.TypeErrors(pkg, file, nil, &diags)
	}
	for _, e := range diags {
		report(pass, e)
	}
	if len(diags) == 0 {
		checkGenerated(pass, file, generated)
	}
	return nil, nil
}

// onlyGeneratedIllTyped reports whether every type error of the package,
// if any, is in its generated file, generated: the driver reports the
// errors, and a stale generated file is the analyzer's to explain.
func onlyGeneratedIllTyped(pass *analysis.Pass, generated string) bool {
	for _, e := range pass.TypeErrors {
		if generated == "" || e.Fset.Position(e.Pos).Filename != generated {
			return false
		}
	}
	return true
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
	got, err := os.ReadFile(generated)
	if err == nil && bytes.Equal(got, want) {
		return
	}
	name := filepath.Base(generated)
	stale := staleDecls(file, got, want)
	if err != nil || len(stale) == 0 {
		pass.Reportf(at, "%s is stale: run go generate (ratelimitgen)", name)
		return
	}
	why := map[string]string{}
	for _, c := range templates.KeyChanges(file, got) {
		why[c.For] = "; " + c.Msg
	}
	for _, d := range stale {
		what := "the directives of " + d.For
		if strings.Contains(d.For, ".") {
			what = "this directive"
		}
		pass.Reportf(pos(pass, d.Pos), "%s is stale: its code for %s differs from %s%s; run go generate (ratelimitgen)", name, d.For, what, why[d.For])
	}
}

// staleDecls returns, once per position, the declarations of want (the
// file generated from file) that got, the generated file on disk, lacks or
// has otherwise, and those got declares for a decorator that want has but
// without them (a method removed). Nil when the difference is elsewhere,
// such as in the imports, or when got does not parse.
func staleDecls(file *model.File, got, want []byte) []templates.Decl {
	gotDecls, wantDecls := declTexts(got), declTexts(want)
	if gotDecls == nil || wantDecls == nil {
		return nil
	}
	decls := templates.Decls(file)
	byName := map[string]templates.Decl{}
	for _, d := range decls {
		byName[d.Name] = d
	}
	// One declaration per position, a method's rather than its type's.
	at := map[token.Position]templates.Decl{}
	add := func(d templates.Decl) {
		if prev, ok := at[d.Pos]; !ok || !strings.Contains(prev.For, ".") {
			at[d.Pos] = d
		}
	}
	for _, d := range decls {
		if text, ok := gotDecls[d.Name]; !ok || text != wantDecls[d.Name] {
			add(d)
		}
	}
	for name := range gotDecls {
		if _, ok := wantDecls[name]; ok {
			continue
		}
		if typ, _, isMethod := strings.Cut(name, "."); isMethod {
			if d, ok := byName[typ]; ok {
				add(d)
			}
		}
	}
	out := slices.Collect(maps.Values(at))
	slices.SortFunc(out, func(a, b templates.Decl) int {
		return cmp.Or(cmp.Compare(a.Pos.Filename, b.Pos.Filename), cmp.Compare(a.Pos.Offset, b.Pos.Offset))
	})
	return out
}

// declTexts returns the text of each named declaration of a Go file, with
// its doc comment, by name (Type.Method for a method), or nil when src does
// not parse.
func declTexts(src []byte) map[string]string {
	fset := token.NewFileSet()
	f, err := goparser.ParseFile(fset, "", src, goparser.ParseComments|goparser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	texts := map[string]string{}
	text := func(doc *ast.CommentGroup, n ast.Node) string {
		start := n.Pos()
		if doc != nil {
			start = doc.Pos()
		}
		return string(src[fset.Position(start).Offset:fset.Position(n.End()).Offset])
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			name := decl.Name.Name
			if decl.Recv != nil && len(decl.Recv.List) == 1 {
				name = recvName(decl.Recv.List[0].Type) + "." + name
			}
			texts[name] = text(decl.Doc, decl)
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				var names []*ast.Ident
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					names = []*ast.Ident{spec.Name}
				case *ast.ValueSpec:
					names = spec.Names
				}
				for _, n := range names {
					if n.Name != "_" {
						texts[n.Name] = text(decl.Doc, decl)
					}
				}
			}
		}
	}
	return texts
}

// recvName returns the name of a receiver's type: T for *T, T[K] or *T[K].
func recvName(x ast.Expr) string {
	for {
		switch t := x.(type) {
		case *ast.StarExpr:
			x = t.X
		case *ast.IndexExpr:
			x = t.X
		case *ast.IndexListExpr:
			x = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
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
