package main

import (
	"fmt"
	"go/types"
	"io"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/ratelimitgen/ratelimitgen/parser"
	"github.com/ratelimitgen/ratelimitgen/templates"
)

// generator is one run of ratelimitgen.
type generator struct {
	opts   options
	stdout io.Writer
	stderr io.Writer
	diags  parser.ErrorList
	cwd    string
}

// result is what one package gets: its generated source, or nil when its
// generated file should not exist.
type result struct {
	pkg  *packages.Package
	path string // the output file
	src  []byte
}

func (g *generator) run() int {
	g.cwd, _ = filepath.Abs(g.opts.dir)
	pkgs, diags := load(g.opts.dir, g.opts.patterns, g.opts.tags)
	g.diags = diags
	if len(pkgs) == 0 && len(diags) == 0 {
		// Like the go command, which only warns about this.
		fmt.Fprintf(g.stderr, "ratelimitgen: warning: %q matched no packages\n", strings.Join(g.opts.patterns, " "))
	}
	var results []*result
	var rows []listRow
	for _, p := range pkgs {
		if hasLoadErrors(p) {
			continue
		}
		r, prows := g.generate(p)
		results = append(results, r)
		rows = append(rows, prows...)
	}
	if len(g.diags) > 0 {
		g.printDiags()
		return exitError
	}
	if g.opts.list {
		if err := printList(g.stdout, rows, g.opts.json, g.rel); err != nil {
			fmt.Fprintln(g.stderr, "ratelimitgen:", err)
			return exitError
		}
		return exitOK
	}
	return g.output(results)
}

func hasLoadErrors(p *packages.Package) bool {
	return len(loadErrors(p)) > 0
}

// generate collects, checks and renders one package.
func (g *generator) generate(p *packages.Package) (*result, []listRow) {
	r := &result{pkg: p, path: filepath.Join(p.Dir, g.opts.output)}
	c := newCollector(p, &g.diags)
	if !c.collect() {
		return r, nil
	}
	file, rows := c.build()
	if file == nil || !c.checkTypeErrors(file) {
		return r, rows
	}
	src, err := templates.Render(file)
	if err != nil {
		c.errorf(c.byType[file.Decorators[0].Type.Obj()].pos, "cannot generate code for package %s: %v", p.PkgPath, err)
		return r, rows
	}
	r.src = src
	return r, rows
}

// checkTypeErrors reports decorated signatures that did not type-check.
// Other type errors are expected: code that uses the generated decorators
// does not compile while the generator runs without them.
func (c *collector) checkTypeErrors(f *templates.File) bool {
	ok := true
	for _, d := range f.Decorators {
		for _, m := range d.Methods {
			if !strings.Contains(types.TypeString(m.Sig, nil), "invalid type") {
				continue
			}
			pos := c.byType[d.Type.Obj()].pos
			if p, found := c.ruleAt[m]; found {
				pos = p
			}
			c.errorf(pos, "cannot generate %s.%s: its signature does not type-check: %s", d.Type.Obj().Name(), m.Name, c.typeErrorOf(d.Type, m.Name))
			ok = false
		}
	}
	return ok
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
	for _, e := range c.pkg.Errors {
		if e.Kind != packages.TypeError {
			continue
		}
		if parsePos(e.Pos).Line == line {
			return e.Msg
		}
		if msg == "" {
			msg = e.Msg
		}
	}
	return msg
}

// printDiags prints every diagnostic once, sorted by position, with file
// names relative to the working directory.
func (g *generator) printDiags() {
	for _, e := range g.diags {
		e.Pos.Filename = g.rel(e.Pos.Filename)
	}
	g.diags.Sort()
	var last string
	for _, e := range g.diags {
		if s := e.Error(); s != last {
			fmt.Fprintln(g.stderr, s)
			last = s
		}
	}
}

// rel returns name relative to the working directory when it is inside it.
func (g *generator) rel(name string) string {
	if name == "" || g.cwd == "" || !filepath.IsAbs(name) {
		return name
	}
	r, err := filepath.Rel(g.cwd, name)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return name
	}
	return r
}
