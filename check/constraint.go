package check

import (
	"go/ast"
	"go/build/constraint"
	"go/token"
	"path/filepath"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// constraint returns the build constraint of the files that declare the
// decorated types (and the limited methods of non-interface types): the
// generated file refers to them, so it must be built exactly when they
// are. Decorated types declared under different constraints cannot share
// one generated file; that is reported.
func (c *collector) constraint(f *model.File) constraint.Expr {
	type source struct {
		what, file string
		pos        token.Position
	}
	var first *source
	for _, d := range f.Decorators {
		t := c.byType[d.Type.Obj()]
		for _, file := range c.sourceFiles(d) {
			s := &source{what: d.Type.Obj().Name(), file: file, pos: t.pos}
			if first == nil {
				first = s
				continue
			}
			if a, b := c.constraints[first.file], c.constraints[file]; a != b {
				c.errorf(s.pos, "%s is declared in %s, built %s, but %s is declared in %s, built %s: their decorators cannot share one generated file; move one of them to another package",
					s.what, filepath.Base(file), describeConstraint(b), first.what, filepath.Base(first.file), describeConstraint(a))
				return nil
			}
		}
	}
	if first == nil || c.constraints[first.file] == "" {
		return nil
	}
	expr, err := constraint.Parse("//go:build " + c.constraints[first.file])
	if err != nil {
		return nil
	}
	return expr
}

// sourceFiles returns the files the decorator's code depends on: the one
// declaring the type and, for a non-interface type, those declaring its
// limited methods.
func (c *collector) sourceFiles(d *model.Decorator) []string {
	files := []string{c.byType[d.Type.Obj()].file}
	if d.Interface() {
		return files
	}
	for _, fn := range methodFuncs(d.Type) {
		for _, m := range d.Methods {
			if m.Name == fn.Name() && m.Rule != nil {
				files = append(files, c.pkg.Fset.Position(fn.Pos()).Filename)
			}
		}
	}
	return files
}

func describeConstraint(s string) string {
	if s == "" {
		return "unconditionally"
	}
	return "under " + s
}

// fileConstraint returns a file's build constraint as an expression string,
// "" when it has none: its //go:build line and what its name implies
// (store_linux.go builds only on linux).
func fileConstraint(f *ast.File, filename string) string {
	var exprs []constraint.Expr
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, cm := range cg.List {
			if constraint.IsGoBuild(cm.Text) {
				if e, err := constraint.Parse(cm.Text); err == nil {
					exprs = append(exprs, e)
				}
			}
		}
	}
	exprs = append(exprs, nameConstraint(filename)...)
	if len(exprs) == 0 {
		return ""
	}
	expr := exprs[0]
	for _, e := range exprs[1:] {
		expr = &constraint.AndExpr{X: expr, Y: e}
	}
	return expr.String()
}

// nameConstraint returns the constraints implied by a file name's
// _GOOS, _GOARCH or _GOOS_GOARCH suffix, the way go/build reads them.
func nameConstraint(filename string) []constraint.Expr {
	name := strings.TrimSuffix(filepath.Base(filename), ".go")
	name = strings.TrimSuffix(name, "_test")
	parts := strings.Split(name, "_")
	n := len(parts)
	tag := func(s string) constraint.Expr { return &constraint.TagExpr{Tag: s} }
	switch {
	case n >= 3 && knownOS[parts[n-2]] && knownArch[parts[n-1]]:
		return []constraint.Expr{tag(parts[n-2]), tag(parts[n-1])}
	case n >= 2 && knownOS[parts[n-1]]:
		return []constraint.Expr{tag(parts[n-1])}
	case n >= 2 && knownArch[parts[n-1]]:
		return []constraint.Expr{tag(parts[n-1])}
	}
	return nil
}

// knownOS and knownArch are the GOOS and GOARCH values go/build recognizes
// in file names (internal/syslist).
var knownOS = setOf("aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios",
	"js", "linux", "nacl", "netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows", "zos")

var knownArch = setOf("386", "amd64", "amd64p32", "arm", "armbe", "arm64", "arm64be", "loong64",
	"mips", "mipsle", "mips64", "mips64le", "mips64p32", "mips64p32le", "ppc", "ppc64", "ppc64le",
	"riscv", "riscv64", "s390", "s390x", "sparc", "sparc64", "wasm")

func setOf(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, s := range items {
		m[s] = true
	}
	return m
}
