package main

import (
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/ratelimitgen/ratelimitgen/parser"
	"github.com/ratelimitgen/ratelimitgen/templates"
)

// loadMode is what the generator needs: syntax and types of the named
// packages only. Dependencies come from export data (no NeedDeps).
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
	packages.NeedTypes | packages.NeedTypesInfo

// load loads every package matching patterns in one go, with the
// ratelimitgen build tag so that generated files are left out. It reports
// list and syntax errors as diagnostics; type errors are kept on the
// packages, since stale or missing generated code is expected to cause
// some, and only matter when a decorated signature is affected.
func load(dir string, patterns, tags []string) ([]*packages.Package, parser.ErrorList) {
	cfg := &packages.Config{
		Dir:        dir,
		Mode:       loadMode,
		BuildFlags: []string{"-tags=" + strings.Join(buildTags(os.Getenv("GOFLAGS"), tags), ",")},
	}
	pkgs, err := packages.Load(cfg, patterns...)
	var diags parser.ErrorList
	if err != nil {
		diags.Add(token.Position{}, "loading packages: %v", err)
		return nil, diags
	}
	for _, p := range pkgs {
		for _, e := range loadErrors(p) {
			diags.Add(parsePos(e.Pos), "%s", e.Msg)
		}
	}
	return pkgs, diags
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
// GOFLAGS environment variable), then extra, then templates.BuildTag. A
// -tags flag on the command line replaces the one in GOFLAGS, so they are
// combined here rather than lost.
func buildTags(goflags string, extra []string) []string {
	var tags []string
	for _, f := range strings.Fields(goflags) {
		if v, ok := strings.CutPrefix(strings.TrimLeft(f, "-"), "tags="); ok {
			tags = slices.DeleteFunc(strings.Split(v, ","), func(s string) bool { return s == "" })
		}
	}
	for _, t := range append(extra, templates.BuildTag) {
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
