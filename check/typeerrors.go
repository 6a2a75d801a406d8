package check

import (
	"go/types"
	"regexp"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// Generated returns the package-level names that the generated file of the
// package with the given import path declares, or will declare once
// generated, or nil when it has none.
type Generated func(path string) map[string]bool

// TypeErrors adds to diags every type error of p, the package whose model
// is f: a package that does not compile gets no generated file, and
// generating one would hide why. Only what the generated code itself
// resolves is left out: the generator loads packages without their
// generated files, so a use of a name that the generated file of p
// declares (undefined: NewStoreWithRateLimit), or that the generated file
// of a package p imports declares (undefined:
// store.NewStoreWithRateLimit, as generated says; nil knows none), is
// expected. A decorated signature that does not type-check is reported
// too, in case its error was one of those.
func TypeErrors(p *Package, f *model.File, generated Generated, diags *parser.ErrorList) {
	own := GeneratedNames(f)
	reported := false
	var last *parser.Error // the last error reported, nil after one left out
	for _, e := range p.TypeErrors {
		if note, ok := strings.CutPrefix(e.Msg, "\t"); ok {
			// go/types continues an error on the next, indented, as in
			// "\tother declaration of method Get".
			if last != nil {
				last.AddNote(e.Pos, "%s", note)
			}
			continue
		}
		last = nil
		if expectedTypeError(p, e, own, generated) {
			continue
		}
		reported = true
		last = diags.Add(e.Pos, "%s%s", e.Msg, unusedImportHint(f, e))
	}
	if !reported {
		checkSignatures(p, f, diags)
	}
}

// GeneratedNames returns the package-level names the generated file of f
// declares: each decorator, its constructor and the rules of its limited
// methods (unless a declaration of the package takes the name, which the
// generated code then avoids), and the function returning the rules.
func GeneratedNames(f *model.File) map[string]bool {
	if len(f.Decorators) == 0 {
		return nil
	}
	names := map[string]bool{model.RulesFunc: true}
	for _, d := range f.Decorators {
		names[d.Name], names[d.Constructor] = true, true
		for _, m := range d.Methods {
			if m.Rule != nil {
				names[model.RuleVarName(d.Type.Obj().Name(), m.Name)] = true
			}
		}
	}
	return names
}

// undefinedPattern matches go/types' message for a use of an undeclared
// name, qualified by a package or not.
var undefinedPattern = regexp.MustCompile(`^undefined: (?:([\pL_][\pL\pN_]*)\.)?([\pL_][\pL\pN_]*)$`)

// expectedTypeError reports whether e is the use of a name that a
// generated file declares.
func expectedTypeError(p *Package, e *parser.Error, own map[string]bool, generated Generated) bool {
	m := undefinedPattern.FindStringSubmatch(e.Msg)
	switch {
	case m == nil:
		return false
	case m[1] == "":
		return own[m[2]]
	case generated == nil:
		return false
	}
	path := importPath(p, e.Pos.Filename, m[1])
	return path != "" && generated(path)[m[2]]
}

// importPath returns the path of the package that file imports as name.
func importPath(p *Package, file, name string) string {
	c := &collector{pkg: p}
	for _, f := range p.Syntax {
		if p.Fset.Position(f.Package).Filename != file {
			continue
		}
		for _, imp := range f.Imports {
			if pn := c.pkgName(imp); pn != nil && pn.Name() == name {
				return pn.Imported().Path()
			}
		}
	}
	return ""
}

// unusedImportPattern matches go/types' message for an unused import.
var unusedImportPattern = regexp.MustCompile(`^"([^"]+)" imported (?:as [\pL_][\pL\pN_]* )?and not used$`)

// unusedImportHint explains an unused import of a package that a
// directive of the same file calls: the compiler does not read comments.
func unusedImportHint(f *model.File, e *parser.Error) string {
	m := unusedImportPattern.FindStringSubmatch(e.Msg)
	if m == nil {
		return ""
	}
	use := ""
	visitRuleValues(f, func(r *model.Rule, option string, v *model.Value) {
		if use == "" && v.Func != nil && v.Func.Obj.Pkg().Path() == m[1] && r.Pos.Filename == e.Pos.Filename {
			use = option + "=" + v.Source
		}
	})
	if use == "" {
		return ""
	}
	return "; " + use + " is in a directive, a comment, which the compiler does not read: import it as _ " + `"` + m[1] + `"` + " (the generated file calls it)"
}

// visitRuleValues calls visit for the key and the cost of every rule of
// f, and for the arguments and lengths they are computed from, with the
// option that holds them.
func visitRuleValues(f *model.File, visit func(r *model.Rule, option string, v *model.Value)) {
	var walk func(r *model.Rule, option string, v *model.Value)
	walk = func(r *model.Rule, option string, v *model.Value) {
		visit(r, option, v)
		if v.Len != nil {
			walk(r, option, v.Len)
		}
		if v.Func != nil {
			for i := range v.Func.Args {
				walk(r, option, &v.Func.Args[i])
			}
		}
	}
	for _, d := range f.Decorators {
		for _, m := range d.Methods {
			if r := m.Rule; r != nil {
				for _, k := range r.Keys() {
					walk(r, "key", &k.Value)
				}
				if r.CostValue != nil {
					walk(r, "cost", r.CostValue)
				}
			}
		}
	}
}

// checkSignatures reports decorated signatures that did not type-check.
func checkSignatures(p *Package, f *model.File, diags *parser.ErrorList) {
	for _, d := range f.Decorators {
		for _, m := range d.Methods {
			if !strings.Contains(types.TypeString(m.Sig, nil), "invalid type") {
				continue
			}
			pos := d.Pos
			if m.Rule != nil {
				pos = m.Rule.Pos
			}
			diags.Add(pos, "cannot generate %s.%s: its signature does not type-check: %s", d.Type.Obj().Name(), m.Name, typeErrorOf(p, d.Type, m.Name))
		}
	}
}

// typeErrorOf returns the message of the type error on the line that
// declares the method, or else the package's first type error.
func typeErrorOf(p *Package, named *types.Named, method string) string {
	line := -1
	var file string
	for _, fn := range methodFuncs(named) {
		if fn.Name() == method && fn.Pos().IsValid() {
			pos := p.Fset.Position(fn.Pos())
			line, file = pos.Line, pos.Filename
		}
	}
	msg := ""
	for _, e := range p.TypeErrors {
		if e.Pos.Line == line && e.Pos.Filename == file {
			return e.Msg
		}
		if msg == "" {
			msg = e.Msg
		}
	}
	return msg
}
