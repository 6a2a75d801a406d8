package check

import (
	"bytes"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// loadMode is what the generator needs: syntax and types of the named
// packages only. Dependencies come from export data (no NeedDeps).
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
	packages.NeedTypes | packages.NeedTypesInfo

// Config says which packages to load.
type Config struct {
	// Dir is the directory to load from, "" for the current one.
	Dir string
	// Patterns are import paths or patterns, as for go build.
	Patterns []string
	// Tags are build tags to load with, besides those of $GOFLAGS.
	Tags []string
}

// Load loads every package matching cfg.Patterns in one go, with the
// ratelimitgen build tag so that generated files are left out, and checks
// each one. It returns the model of every package that loaded (list and
// syntax errors are diagnostics and keep a package out), in load order,
// and the diagnostics of all of them: for a package with directives,
// these include its type errors (see TypeErrors).
func Load(cfg Config) ([]*model.File, parser.ErrorList) {
	buildFlags := []string{"-tags=" + strings.Join(buildTags(os.Getenv("GOFLAGS"), cfg.Tags), ",")}
	pkgs, err := packages.Load(&packages.Config{
		Dir:        cfg.Dir,
		Mode:       loadMode,
		BuildFlags: buildFlags,
	}, cfg.Patterns...)
	var diags parser.ErrorList
	if err != nil {
		diags.Add(token.Position{}, "loading packages: %v", err)
		return nil, diags
	}
	type checked struct {
		pkg        *Package
		file       *model.File
		directives bool
	}
	var (
		all   []checked
		files []*model.File
	)
	for _, p := range pkgs {
		errs := loadErrors(p)
		for _, e := range errs {
			diags.Add(parsePos(e.Pos), "%s", e.Msg)
		}
		if len(errs) == 0 {
			pkg, before := fromPackages(p), len(diags)
			f := Check(pkg, &diags)
			files = append(files, f)
			all = append(all, checked{pkg, f, len(f.Decorators) > 0 || len(diags) > before})
		}
	}
	gen := &generatedNames{dir: cfg.Dir, buildFlags: buildFlags, byPath: map[string]map[string]bool{}}
	for _, c := range all {
		gen.byPath[c.file.PkgPath] = GeneratedNames(c.file)
	}
	for _, c := range all {
		if c.directives {
			TypeErrors(c.pkg, c.file, gen.lookup, &diags)
		}
	}
	return files, diags
}

// generatedNames finds the names the generated files of packages declare:
// those of the packages being generated from their models, the others'
// from the generated files they have.
type generatedNames struct {
	dir        string
	buildFlags []string
	byPath     map[string]map[string]bool
}

func (g *generatedNames) lookup(path string) map[string]bool {
	if names, ok := g.byPath[path]; ok {
		return names
	}
	g.byPath[path] = nil
	pkgs, err := packages.Load(&packages.Config{Dir: g.dir, Mode: packages.NeedName | packages.NeedFiles, BuildFlags: g.buildFlags}, path)
	if err != nil || len(pkgs) != 1 {
		return nil
	}
	for _, name := range pkgs[0].IgnoredFiles {
		if names := declaredBy(name); names != nil {
			g.byPath[path] = names
			break
		}
	}
	return g.byPath[path]
}

// declaredBy returns the package-level names declared by the file called
// name when ratelimitgen generated it, or nil.
func declaredBy(name string) map[string]bool {
	src, err := os.ReadFile(name)
	if err != nil || !bytes.HasPrefix(src, []byte(model.Header+"\n")) {
		return nil
	}
	f, err := goparser.ParseFile(token.NewFileSet(), name, src, goparser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil {
				names[decl.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					names[spec.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names
}

// fromPackages returns what Check needs of a package go/packages loaded.
func fromPackages(p *packages.Package) *Package {
	var typeErrors parser.ErrorList
	for _, e := range p.Errors {
		if e.Kind == packages.TypeError {
			typeErrors.Add(parsePos(e.Pos), "%s", e.Msg)
		}
	}
	return &Package{
		Path: p.PkgPath, Name: p.Name, Dir: p.Dir,
		Fset: p.Fset, Syntax: p.Syntax, Types: p.Types, Info: p.TypesInfo,
		TypeErrors: typeErrors,
	}
}

// loadErrors returns the errors that keep a package from being processed:
// everything but type errors. Without NeedDeps, go/packages has go list
// compile the packages for export data, so a package that does not
// compile also reports its compiler output ("# path\n...") as a list
// error; that duplicates its type errors and is treated like them.
func loadErrors(p *packages.Package) []packages.Error {
	var out []packages.Error
	for _, e := range p.Errors {
		compiler := e.Kind == packages.ListError && strings.HasPrefix(e.Msg, "# ") && p.Types != nil
		if e.Kind != packages.TypeError && !compiler {
			out = append(out, e)
		}
	}
	return out
}

// buildTags returns the tags to load with: the -tags of goflags (the
// GOFLAGS environment variable), then extra, then model.BuildTag. A
// -tags flag on the command line replaces the one in GOFLAGS, so they are
// combined here rather than lost.
func buildTags(goflags string, extra []string) []string {
	var tags []string
	for _, f := range strings.Fields(goflags) {
		if v, ok := strings.CutPrefix(strings.TrimLeft(f, "-"), "tags="); ok {
			tags = slices.DeleteFunc(strings.Split(v, ","), func(s string) bool { return s == "" })
		}
	}
	for _, t := range append(extra, model.BuildTag) {
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	return tags
}

var posPattern = regexp.MustCompile(`^(.*?):(\d+)(?::(\d+))?$`)

// parsePos parses a go/packages error position: "file:line:col",
// "file:line", "" or "-".
func parsePos(s string) token.Position {
	m := posPattern.FindStringSubmatch(s)
	if m == nil {
		if s == "-" {
			s = ""
		}
		return token.Position{Filename: s}
	}
	line, _ := strconv.Atoi(m[2])
	col, _ := strconv.Atoi(m[3])
	return token.Position{Filename: m[1], Line: line, Column: col}
}
