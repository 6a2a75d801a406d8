package ratelimit

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The in-process limiter lives in a room of its own (issue 36): its files
// are those named memory*.go, and they reach the rest of package ratelimit
// only through what a backend written outside the module could use (its
// exported API) and internal packages.

// isMemoryFile reports whether the Go file at path is one of the
// in-process limiter's.
func isMemoryFile(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "memory")
}

// loadRatelimit loads package ratelimit, without its tests, with its
// syntax and types, once for the tests that read it.
func loadRatelimit(t *testing.T) *packages.Package {
	t.Helper()
	pkg, err := loadedRatelimit()
	if err != nil {
		t.Fatalf("load package ratelimit: %v", err)
	}
	return pkg
}

var loadedRatelimit = sync.OnceValues(func() (*packages.Package, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, ".")
	switch {
	case err != nil:
		return nil, err
	case len(pkgs) != 1:
		return nil, fmt.Errorf("%d packages", len(pkgs))
	case len(pkgs[0].Errors) > 0:
		return nil, pkgs[0].Errors[0]
	}
	return pkgs[0], nil
})

// TestMemoryLimiterUsesOnlyExportedCore fails for each use, in a file of
// the in-process limiter, of an unexported identifier of package
// ratelimit declared outside those files: that limiter could not live
// anywhere else, as any other backend can.
func TestMemoryLimiterUsesOnlyExportedCore(t *testing.T) {
	pkg := loadRatelimit(t)
	for _, use := range crossings(pkg, true) {
		t.Errorf("%s: the in-process limiter uses %s, declared in %s: use exported API or an internal package", use.at(), use.what, use.decl)
	}
	files := 0
	for _, f := range pkg.GoFiles {
		if isMemoryFile(f) {
			files++
		}
	}
	if files == 0 {
		t.Fatal("no file of the in-process limiter (memory*.go) found")
	}
}

// TestCoreUsesNoMemoryInternals fails for each use, outside the files of
// the in-process limiter, of an unexported identifier declared in them:
// the core builds no backend's plans.
func TestCoreUsesNoMemoryInternals(t *testing.T) {
	pkg := loadRatelimit(t)
	for _, use := range crossings(pkg, false) {
		t.Errorf("%s: the core uses %s of the in-process limiter (%s)", use.at(), use.what, use.decl)
	}
}

// crossing is a use of an unexported identifier across the wall around
// the in-process limiter's files.
type crossing struct {
	use  token.Position
	what string // the identifier, described
	decl string // the file that declares it
}

// at returns where the use is: file:line:column.
func (c crossing) at() string {
	return fmt.Sprintf("%s:%d:%d", filepath.Base(c.use.Filename), c.use.Line, c.use.Column)
}

// crossings returns, sorted by place, the uses in the in-process
// limiter's files (fromMemory) or in the others of an unexported
// identifier of package ratelimit declared on the other side.
func crossings(pkg *packages.Package, fromMemory bool) []crossing {
	var out []crossing
	for ident, obj := range pkg.TypesInfo.Uses {
		use := pkg.Fset.Position(ident.Pos())
		if isMemoryFile(use.Filename) != fromMemory || obj.Pkg() != pkg.Types || obj.Exported() {
			continue
		}
		if decl := pkg.Fset.Position(obj.Pos()); isMemoryFile(decl.Filename) != fromMemory {
			out = append(out, crossing{use: use, what: describe(obj), decl: filepath.Base(decl.Filename)})
		}
	}
	slices.SortFunc(out, func(a, b crossing) int {
		return cmp.Or(strings.Compare(a.use.Filename, b.use.Filename), cmp.Compare(a.use.Offset, b.use.Offset))
	})
	return out
}

// describe names obj as a reader finds it: a method or field with its
// receiver's type.
func describe(obj types.Object) string {
	switch o := obj.(type) {
	case *types.Func:
		if recv := o.Signature().Recv(); recv != nil {
			return "method " + typeName(recv.Type()) + "." + o.Name()
		}
		return "func " + o.Name()
	case *types.Var:
		if o.IsField() {
			return "field " + o.Name()
		}
	}
	return obj.Name()
}

// typeName returns the name of t's named type, through a pointer.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return t.String()
}

// TestNoFileHoldsRuleAndMemoryLimiter fails for a file that declares both
// a method of Rule and one of MemoryLimiter, and for a method of
// MemoryLimiter declared outside the in-process limiter's files: Rule's
// pipeline and the in-process backend live in files of their own.
func TestNoFileHoldsRuleAndMemoryLimiter(t *testing.T) {
	pkg := loadRatelimit(t)
	for _, f := range pkg.Syntax {
		var rule, memory token.Pos
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			switch typeName(pkg.TypesInfo.TypeOf(fn.Recv.List[0].Type)) {
			case "Rule":
				rule = fn.Pos()
			case "MemoryLimiter":
				memory = fn.Pos()
			}
		}
		r, m := pkg.Fset.Position(rule), pkg.Fset.Position(memory)
		if rule.IsValid() && memory.IsValid() {
			t.Errorf("%s declares methods of both Rule (line %d) and MemoryLimiter (line %d)", filepath.Base(r.Filename), r.Line, m.Line)
		}
		if memory.IsValid() && !isMemoryFile(m.Filename) {
			t.Errorf("%s:%d: a method of MemoryLimiter outside its files (memory*.go)", filepath.Base(m.Filename), m.Line)
		}
	}
}
