package templates

import (
	"bytes"
	"fmt"
	"go/token"
	"path/filepath"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// Decl is a declaration of the generated file and where what it is
// generated from is written.
type Decl struct {
	// Name is the declared name, or Type.Method for a method.
	Name string
	// Pos is the directive of the rule of a limited method, for the
	// method and its rule variable, and the decorator's first directive
	// (model.Decorator.Pos) for the decorator type, its constructor and
	// its other methods.
	Pos token.Position
	// For names what the declaration implements: Type.Method for a
	// limited method and its rule, Type otherwise.
	For string
}

// Decls returns the declarations of the file Render writes for f, with
// where each comes from, so that a difference between two renderings can
// be told where to look. The function returning the rules (model.RulesFunc)
// and the assertions that a decorator implements its interfaces are left
// out: they change with a rule or a decorator, whose declarations are
// returned.
func Decls(f *model.File) []Decl {
	r := newRenderer(f)
	var out []Decl
	for _, p := range r.decs {
		typeName := p.Type.Obj().Name()
		out = append(out, Decl{p.name, p.Pos, typeName}, Decl{p.ctor, p.Pos, typeName})
		for _, m := range p.methods {
			method := Decl{p.name + "." + m.Name, p.Pos, typeName}
			if m.rule != "" {
				method.Pos, method.For = m.Rule.Pos, typeName+"."+m.Name
				out = append(out, Decl{m.rule, m.Rule.Pos, method.For})
			}
			out = append(out, method)
		}
	}
	return out
}

// KeyChange is a limited method whose generated code changed meaning when
// each directive line got its own key= (issue 21): some of its lines have
// a key=, all the same, and others none, which limited every line under
// that key before and limits every call together on those lines now.
type KeyChange struct {
	// For is the method, Type.Method; Pos is its first directive.
	For string
	Pos token.Position
	// Msg says which lines changed and how to keep their old meaning.
	Msg string
}

// KeyChanges returns the methods of f whose code in old, a file generated
// for f's package, is from before each line had its own key=: it checks
// the call with Rule.Check under a rule that has no key per line
// (KeyExprs) where f's code has a key per line. A method whose old code
// has a key per line already is none, whatever else changed.
func KeyChanges(f *model.File, old []byte) []KeyChange {
	var out []KeyChange
	r := newRenderer(f)
	for _, p := range r.decs {
		for _, m := range p.methods {
			if m.rule == "" || !bytes.Contains(old, []byte(m.rule+".Check(")) || keyedPerLine(old, m.rule) {
				continue
			}
			if msg := keyChange(m.Rule); msg != "" {
				out = append(out, KeyChange{p.Type.Obj().Name() + "." + m.Name, m.Rule.Pos, msg})
			}
		}
	}
	return out
}

// keyedPerLine reports whether old declares the rule variable rule with
// a key per line (KeyExprs), as code from after issue 21 does.
func keyedPerLine(old []byte, rule string) bool {
	_, decl, ok := bytes.Cut(old, []byte("\nvar "+rule+" = "))
	if !ok {
		return false
	}
	decl, _, _ = bytes.Cut(decl, []byte("\n}\n"))
	return bytes.Contains(decl, []byte("KeyExprs:"))
}

// keyChange describes the lines of rule without key= when its other lines
// all have the same one, or returns "". A shared line is left out: it is
// declared once for every method that takes it, and limits them together
// by its own key= or none, before as now.
func keyChange(rule *model.Rule) string {
	keys := rule.Keys()
	if len(keys) != 1 {
		return ""
	}
	var at []string
	for _, l := range rule.Limits {
		if l.Key == nil && l.Shared == "" {
			at = append(at, fmt.Sprintf("%s:%d:%d", filepath.Base(l.Pos.Filename), l.Pos.Line, l.Pos.Column))
		}
	}
	k := keys[0].Source
	switch len(at) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("each line has its own key= now: the line at %s has none and limits every call together (it limited each %s before: write key=%s on it to keep that)", at[0], k, k)
	}
	return fmt.Sprintf("each line has its own key= now: the lines at %s have none and limit every call together (they limited each %s before: write key=%s on them to keep that)", strings.Join(at, ", "), k, k)
}
