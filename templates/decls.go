package templates

import (
	"go/token"

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
