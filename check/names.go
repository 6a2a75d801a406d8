package check

import (
	"go/token"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// nameDecorators names each decorator and its constructor, and reports a
// fixed name (an exported one, or one a decorator= directive chose) that
// is already declared in the package or taken by another decorator: a
// declaration elsewhere in the package must never change the generated
// API by renaming it.
func (c *collector) nameDecorators(f *model.File) {
	c.rulesFuncDeclared(f)
	taken := map[string]*model.Decorator{}
	for _, d := range f.Decorators {
		t := c.byType[d.Type.Obj()]
		d.Name = model.DefaultName(d.Type.Obj().Name())
		if t.naming != nil {
			d.Name = t.naming.Decorator
		}
		d.Constructor = model.ConstructorName(d.Name)
		d.Fixed = t.naming != nil || token.IsExported(d.Name)
		if !d.Fixed {
			continue
		}
		if d.Name == model.RulesFunc {
			c.errorf(t.naming.Pos, "decorator=%s: %s is the name of the function that returns the package's rules; choose another name", d.Name, d.Name)
			continue
		}
		for _, name := range []string{d.Name, d.Constructor} {
			if other := taken[name]; other != nil {
				c.nameTakenByDecorator(t, name, other)
				break // its constructor's name follows
			}
			c.nameDeclared(t, d, name)
			taken[name] = d
		}
	}
}

// rulesFuncDeclared reports a declaration of model.RulesFunc in the
// package of f, which has decorators: the generated file declares it.
func (c *collector) rulesFuncDeclared(f *model.File) {
	obj := c.pkg.Types.Scope().Lookup(model.RulesFunc)
	if obj == nil || len(f.Decorators) == 0 {
		return
	}
	first := f.Decorators[0].Type.Obj()
	c.errorf(c.pkg.Fset.Position(obj.Pos()), "%s is declared here and is the name of the function that the generated file declares to return the package's rules: rename this declaration, or delete it if it lists them by hand",
		model.RulesFunc).
		AddNote(c.pkg.Fset.Position(first.Pos()), "type %s is decorated", first.Name())
}

// nameDeclared reports name, which d must declare, if the package
// declares it already.
func (c *collector) nameDeclared(t *target, d *model.Decorator, name string) {
	obj := c.pkg.Types.Scope().Lookup(name)
	if obj == nil {
		return
	}
	what := "is the name of the decorator of " + t.obj.Name()
	if name == d.Constructor {
		what = "is the name of the constructor of " + d.Name + ", the decorator of " + t.obj.Name()
	}
	typePos := c.pkg.Fset.Position(t.obj.Pos())
	if t.naming != nil {
		c.errorf(c.pkg.Fset.Position(obj.Pos()), "%s is declared here and %s, which decorator=%s chose: rename this declaration or choose another name", name, what, t.naming.Decorator).
			AddNote(t.naming.Pos, "decorator=%s", t.naming.Decorator)
		return
	}
	c.errorf(c.pkg.Fset.Position(obj.Pos()), "%s is declared here and %s: rename this declaration, or name the decorator with //ratelimit:decorator=<Name> in the doc comment of type %s (its constructor is then New<Name>)",
		name, what, t.obj.Name()).
		AddNote(typePos, "type %s is decorated", t.obj.Name())
}

// nameTakenByDecorator reports two decorators that would declare the same
// name.
func (c *collector) nameTakenByDecorator(t *target, name string, other *model.Decorator) {
	pos := t.pos
	if t.naming != nil {
		pos = t.naming.Pos
	}
	c.errorf(pos, "the decorator of %s would declare %s, which the decorator of %s declares: name one of them with another //ratelimit:decorator=<Name>", t.obj.Name(), name, other.Type.Obj().Name()).
		AddNote(other.Pos, "decorator of %s", other.Type.Obj().Name())
}
