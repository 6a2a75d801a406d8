package templates

import (
	"bytes"
	"cmp"
	"fmt"
	"go/build/constraint"
	"go/format"
	"go/types"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"
	"golang.org/x/tools/imports"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// Render returns the generated Go source of f, gofmt'd: the Header line,
// the build constraint, for each decorator its type, constructor, rules
// and methods, and the function that returns the package's rules
// (model.RulesFunc).
func Render(f *model.File) ([]byte, error) {
	r := newRenderer(f)
	jf := r.file()
	if r.types.err != nil {
		return nil, r.types.err
	}
	var buf bytes.Buffer
	if err := jf.Render(&buf); err != nil {
		return nil, err
	}
	// goimports' formatting groups the standard library imports apart;
	// go/format then guarantees gofmt's layout.
	src, err := imports.Process(r.f.PkgName+".go", buf.Bytes(), &imports.Options{
		FormatOnly: true, Comments: true, TabIndent: true, TabWidth: 8,
	})
	if err == nil {
		src, err = format.Source(src)
	}
	if err != nil {
		return nil, fmt.Errorf("formatting generated code: %w\n%s", err, buf.Bytes())
	}
	return src, nil
}

// universeNames are the predeclared identifiers generated code may use;
// no generated package-level name or import takes them.
var universeNames = []string{
	"any", "bool", "comparable", "error", "false", "int64", "len", "nil", "string", "true", "uint64",
}

// renderer holds the naming decisions for one file.
type renderer struct {
	f     *model.File
	types typeNames
	// pkg holds the file's package-level names: imports, decorator types,
	// constructors and rule variables, avoiding the user's declarations.
	pkg  *names
	decs []*decoratorPlan
	// isNil names the file's helper that tells a nil argument (see
	// nilHelper).
	isNil string
}

func newRenderer(f *model.File) *renderer {
	r := &renderer{
		f:     f,
		types: typeNames{pkgPath: f.PkgPath, imports: map[string]string{}},
		pkg:   newNames(inScope(f.Scope)),
	}
	r.pkg.reserve(universeNames...)
	r.pkg.reserve(model.RulesFunc) // free in the package: the check stage made sure
	for _, d := range f.Decorators {
		if d.Fixed {
			r.pkg.reserve(d.Name, d.Constructor) // imports avoid them
		}
	}
	r.planImports()
	r.isNil = r.pkg.fresh("isNil")
	for _, d := range f.Decorators {
		r.decs = append(r.decs, r.planDecorator(d))
	}
	for _, d := range r.decs {
		r.planMembers(d)
	}
	return r
}

// planImports names every package the file refers to. The runtime comes
// first, then the standard library, then the rest, each sorted by path;
// a package whose name is already taken gets a numbered alias.
func (r *renderer) planImports() {
	pkgs := r.neededImports()
	paths := make([]string, 0, len(pkgs))
	for p := range pkgs {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(a, b string) int {
		return cmp.Or(cmp.Compare(importRank(a), importRank(b)), cmp.Compare(a, b))
	})
	for _, p := range paths {
		r.types.imports[p] = r.pkg.fresh(pkgs[p])
	}
}

func importRank(path string) int {
	switch {
	case path == RuntimePath:
		return 0
	case !strings.Contains(strings.Split(path, "/")[0], "."):
		return 1
	}
	return 2
}

// neededImports returns the name of every package the file refers to, by
// import path.
func (r *renderer) neededImports() map[string]string {
	pkgs := map[string]string{RuntimePath: "ratelimit", "time": "time", "reflect": "reflect"}
	add := func(obj *types.TypeName) {
		if p := obj.Pkg(); p != nil && p.Path() != r.f.PkgPath && !isTypeParam(obj) {
			pkgs[p.Path()] = p.Name()
		}
	}
	for _, d := range r.f.Decorators {
		if tps := d.Type.TypeParams(); tps != nil {
			for i := 0; i < tps.Len(); i++ {
				visitTypeNames(tps.At(i).Constraint(), add)
			}
		}
		for _, t := range d.Asserts {
			visitTypeNames(t, add)
		}
		for _, m := range d.Methods {
			visitTypeNames(m.Sig, add)
			if m.Rule == nil {
				continue
			}
			if m.Rule.Context < 0 {
				pkgs["context"] = "context"
			}
			for _, k := range m.Rule.Keys() {
				if k.Format >= model.KeyInt64 {
					pkgs["strconv"] = "strconv"
				}
				r.funcImports(&k.Value, pkgs)
			}
			if v := m.Rule.CostValue; v != nil {
				r.funcImports(v, pkgs)
			}
		}
	}
	return pkgs
}

// funcImports adds the packages of the functions v calls to pkgs.
func (r *renderer) funcImports(v *model.Value, pkgs map[string]string) {
	if v.Len != nil {
		r.funcImports(v.Len, pkgs)
	}
	if f := v.Func; f != nil {
		if p := f.Obj.Pkg(); p.Path() != r.f.PkgPath {
			pkgs[p.Path()] = p.Name()
		}
		for i := range f.Args {
			r.funcImports(&f.Args[i], pkgs)
		}
	}
}

// file builds the jennifer file.
func (r *renderer) file() *jen.File {
	f := jen.NewFilePathName(r.f.PkgPath, r.f.PkgName)
	f.NoFormat = true // Render runs go/format once
	f.HeaderComment(model.Header)
	f.HeaderComment("//go:build " + r.constraint().String())
	for path, name := range r.types.imports {
		if name == assumedPackageName(path) {
			f.ImportName(path, name)
		} else {
			f.ImportAlias(path, name)
		}
	}
	if r.namesZone() {
		// The zones are loaded where the code runs: Go's copy of the tz
		// database makes that work on a machine without one, as
		// generating it checked them.
		f.Anon("time/tzdata")
	}
	for _, d := range r.decs {
		r.decorator(f.Group, d)
	}
	r.rulesFunc(f.Group)
	r.nilHelper(f.Group)
	return f
}

// nilHelper writes the function the constructors refuse a nil argument
// with: nil itself, or an interface that holds a nil pointer (a typed
// nil), which == nil does not catch.
func (r *renderer) nilHelper(g *jen.Group) {
	v := jen.Id("v")
	doc(g, r.isNil+" reports whether "+"v is nil, or holds a nil pointer, map, slice, func or channel.")
	kind := func(k string) jen.Code { return jen.Qual("reflect", k) }
	g.Func().Id(r.isNil).Params(jen.Id("v").Any()).Bool().Block(
		jen.Switch(jen.Id("rv").Op(":=").Qual("reflect", "ValueOf").Call(v), jen.Id("rv").Dot("Kind").Call()).Block(
			jen.Case(kind("Invalid")).Block(jen.Return(jen.True())),
			jen.Case(kind("Pointer"), kind("Map"), kind("Slice"), kind("Func"), kind("Chan")).Block(
				jen.Return(jen.Id("rv").Dot("IsNil").Call())),
		),
		jen.Return(jen.False()),
	)
}

// namesZone reports whether a limit of the file has a calendar period in
// a time zone other than UTC.
func (r *renderer) namesZone() bool {
	for _, d := range r.decs {
		for _, m := range d.Methods {
			if m.Rule == nil {
				continue
			}
			for _, l := range m.Rule.Limits {
				if l.TZ != "" && l.TZ != "UTC" {
					return true
				}
			}
		}
	}
	return false
}

// constraint returns the generated file's build constraint.
func (r *renderer) constraint() constraint.Expr {
	not := &constraint.NotExpr{X: &constraint.TagExpr{Tag: model.BuildTag}}
	if r.f.Constraint == nil {
		return not
	}
	return &constraint.AndExpr{X: r.f.Constraint, Y: not}
}

// rt returns a reference to name in the runtime package.
func (r *renderer) rt(name string) *jen.Statement {
	return jen.Qual(RuntimePath, name)
}

// doc appends text to g as a doc comment wrapped at 77 columns.
func doc(g *jen.Group, text string) {
	for _, line := range wrap(text, 77) {
		if line == "" {
			line = "//" // an empty comment line, without a trailing space
		}
		g.Comment(line)
	}
}

// wrap splits text into lines of at most width bytes, breaking at spaces.
// A blank line is kept as an empty comment line.
func wrap(text string, width int) []string {
	var lines []string
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			lines = append(lines, "")
		}
		line := ""
		for _, w := range strings.Fields(para) {
			if line != "" && len(line)+1+len(w) > width {
				lines = append(lines, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		lines = append(lines, line)
	}
	return lines
}

// RuntimePath is the import path of the runtime package, named ratelimit.
const RuntimePath = "github.com/ratelimitgen/ratelimitgen/runtime"
