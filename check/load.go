package check

import (
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
// and the diagnostics of all of them.
func Load(cfg Config) ([]*model.File, parser.ErrorList) {
	pkgs, err := packages.Load(&packages.Config{
		Dir:        cfg.Dir,
		Mode:       loadMode,
		BuildFlags: []string{"-tags=" + strings.Join(buildTags(os.Getenv("GOFLAGS"), cfg.Tags), ",")},
	}, cfg.Patterns...)
	var diags parser.ErrorList
	if err != nil {
		diags.Add(token.Position{}, "loading packages: %v", err)
		return nil, diags
	}
	var files []*model.File
	for _, p := range pkgs {
		errs := loadErrors(p)
		for _, e := range errs {
			diags.Add(parsePos(e.Pos), "%s", e.Msg)
		}
		if len(errs) == 0 {
			files = append(files, Check(fromPackages(p), &diags))
		}
	}
	return files, diags
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
