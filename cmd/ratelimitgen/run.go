package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/check"
	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
	"github.com/ratelimitgen/ratelimitgen/templates"
	"github.com/ratelimitgen/ratelimitgen/write"
)

// generator is one run of ratelimitgen: it passes the options to the
// stages (check, templates, write) and prints what they report.
type generator struct {
	opts   options
	stdout io.Writer
	stderr io.Writer
	cwd    string
}

func (g *generator) run() int {
	g.cwd, _ = filepath.Abs(g.opts.dir)
	files, diags := check.Load(check.Config{Dir: g.opts.dir, Patterns: g.opts.patterns, Tags: g.opts.tags})
	if len(files) == 0 && len(diags) == 0 {
		// Like the go command, which only warns about this.
		fmt.Fprintf(g.stderr, "ratelimitgen: warning: %q matched no packages\n", strings.Join(g.opts.patterns, " "))
	}
	var out []write.File
	if len(diags) == 0 && !g.opts.list {
		out = g.render(files, &diags)
	}
	if len(diags) > 0 {
		g.printDiags(diags)
		return exitError
	}
	if g.opts.list {
		if err := printList(g.stdout, listRows(files), g.opts.json, g.rel); err != nil {
			fmt.Fprintln(g.stderr, "ratelimitgen:", err)
			return exitError
		}
		return exitOK
	}
	if g.opts.check {
		g.printKeyChanges(files, out)
	}
	stale, errs := write.Files(out, write.Options{Check: g.opts.check, Diff: g.stdout, Rel: g.rel})
	for _, err := range errs {
		fmt.Fprintln(g.stderr, "ratelimitgen:", err)
	}
	if stale || len(errs) > 0 {
		return exitError
	}
	return exitOK
}

// render returns the generated file of every package: its source, or none
// for a package without decorators.
func (g *generator) render(files []*model.File, diags *parser.ErrorList) []write.File {
	out := make([]write.File, 0, len(files))
	for _, f := range files {
		w := write.File{Path: filepath.Join(f.Dir, g.opts.output)}
		if len(f.Decorators) > 0 {
			src, err := templates.Render(f)
			if err != nil {
				diags.Add(f.Decorators[0].Pos, "cannot generate code for package %s: %v", f.PkgPath, err)
			}
			w.Src = src
		}
		out = append(out, w)
	}
	return out
}

// printKeyChanges says, at its directive, which stale code of out (the
// files of files, in order) changed meaning when each directive line got
// its own key=, as the analyzer does: the diff alone does not say why.
func (g *generator) printKeyChanges(files []*model.File, out []write.File) {
	for i, f := range files {
		old, err := os.ReadFile(out[i].Path)
		if err != nil || out[i].Src == nil || bytes.Equal(old, out[i].Src) {
			continue
		}
		for _, c := range templates.KeyChanges(f, old) {
			c.Pos.Filename = g.rel(c.Pos.Filename)
			fmt.Fprintf(g.stderr, "%s: %s is stale: its code for %s differs from this directive; %s; run go generate (ratelimitgen)\n",
				c.Pos, filepath.Base(out[i].Path), c.For, c.Msg)
		}
	}
}

// printDiags prints every diagnostic once, sorted by position, with file
// names relative to the working directory.
func (g *generator) printDiags(diags parser.ErrorList) {
	for _, e := range diags {
		e.Pos.Filename = g.rel(e.Pos.Filename)
		for i := range e.Notes {
			e.Notes[i].Pos.Filename = g.rel(e.Notes[i].Pos.Filename)
		}
	}
	diags.Sort()
	var last string
	for _, e := range diags {
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
