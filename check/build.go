package check

import (
	"cmp"
	"go/token"
	"go/types"
	"slices"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// build checks the collected directives against the types and adds the
// decorators to f.
func (c *collector) build(f *model.File) {
	slices.SortFunc(c.targets, func(a, b *target) int { return cmp.Compare(a.obj.Name(), b.obj.Name()) })
	c.registerShared()
	for _, t := range c.targets {
		if d := c.decorator(t); d != nil {
			f.Decorators = append(f.Decorators, d)
		}
	}
	c.checkSharedUsed()
	c.checkSharedNames(f)
	c.nameDecorators(f)
	f.Constraint = c.constraint(f)
}

// decorator returns the decorator of t, or nil after reporting why there
// cannot be one.
func (c *collector) decorator(t *target) *model.Decorator {
	if !t.limited && t.naming == nil {
		return nil // shared lines alone: checkSharedUsed reports them
	}
	if !t.limited {
		c.errorf(t.naming.Pos, "decorator=%s: %s has no limits to decorate it with; write them in the doc comment of %s or of its methods", t.naming.Decorator, t.obj.Name(), t.obj.Name())
		return nil
	}
	named, ok := t.obj.Type().(*types.Named)
	if !ok {
		c.errorf(t.pos, "cannot decorate %s: not a named type", t.obj.Name())
		return nil
	}
	var d *model.Decorator
	if iface, ok := named.Underlying().(*types.Interface); ok {
		d = c.interfaceDecorator(t, named, iface)
	} else {
		d = c.concreteDecorator(t, named)
	}
	if d != nil {
		c.checkTypeDirsUsed(t)
	}
	return d
}

// checkTypeDirsUsed reports the limits of a type's doc comment when every
// method has directives of its own: they limit nothing.
func (c *collector) checkTypeDirsUsed(t *target) {
	if len(t.typeDirs) == 0 || t.typeDirsUsed {
		return
	}
	for _, d := range t.typeDirs {
		if c.broken[d] {
			return // its errors are reported
		}
	}
	for _, d := range t.typeDirs {
		c.errorf(d.Pos, "this limit of type %s limits no method: a type's directives limit each method that has none of its own, and every method of %s has some; delete it, or move it to a method", t.obj.Name(), t.obj.Name())
	}
}

func (c *collector) interfaceDecorator(t *target, named *types.Named, iface *types.Interface) *model.Decorator {
	name := t.obj.Name()
	switch {
	case !iface.IsMethodSet():
		c.errorf(t.pos, "cannot decorate %s: an interface with type constraints is not the type of any value", name)
		return nil
	case iface.NumMethods() == 0:
		c.errorf(t.pos, "cannot decorate %s: it has no methods", name)
		return nil
	}
	d := &model.Decorator{Type: named, Pos: t.pos, Asserts: foreignEmbeddeds(iface, c.pkg.Types)}
	for i := 0; i < iface.NumMethods(); i++ {
		fn := iface.Method(i)
		if !fn.Exported() && fn.Pkg() != c.pkg.Types {
			d.Embed = true // only the embedded value can implement fn
			continue
		}
		d.Methods = append(d.Methods, c.method(t, fn))
	}
	if d.Embed {
		// Every method is promoted or overridden: none may be named like
		// the embedded field.
		if fn, _, _ := types.LookupFieldOrMethod(named, false, c.pkg.Types, name); fn != nil {
			c.errorf(t.pos, "cannot decorate %s: its method %s would clash with the field that embeds %s", name, name, name)
			return nil
		}
		d.Methods = slices.DeleteFunc(d.Methods, func(m *model.Method) bool { return m.Rule == nil })
		if len(d.Methods) == 0 {
			return nil
		}
	}
	slices.SortFunc(d.Methods, func(a, b *model.Method) int { return cmp.Compare(a.Name, b.Name) })
	return d
}

// foreignEmbeddeds returns the interfaces of other packages than pkg that
// iface embeds.
func foreignEmbeddeds(iface *types.Interface, pkg *types.Package) []types.Type {
	var out []types.Type
	for i := 0; i < iface.NumEmbeddeds(); i++ {
		t := iface.EmbeddedType(i)
		n, ok := types.Unalias(t).(*types.Named)
		if ok && n.Obj().Pkg() != nil && n.Obj().Pkg() != pkg && types.IsInterface(n) {
			out = append(out, t)
		}
	}
	return out
}

// embeddable reports whether d can embed a pointer to the decorated
// type: it has limited methods, and none is named like the type, which
// names the embedded field.
func (c *collector) embeddable(t *target, d *model.Decorator) bool {
	name := t.obj.Name()
	for _, m := range d.Methods {
		if m.Name == name {
			c.errorf(t.pos, "cannot decorate %s: its method %s would clash with the field that embeds %s", name, m.Name, name)
			return false
		}
	}
	return len(d.Methods) > 0
}

func (c *collector) concreteDecorator(t *target, named *types.Named) *model.Decorator {
	name := t.obj.Name()
	if named.NumMethods() == 0 {
		c.errorf(t.pos, "cannot decorate %s: it has no methods", name)
		return nil
	}
	d := &model.Decorator{Type: named, Pos: t.pos, Embed: true}
	for i := 0; i < named.NumMethods(); i++ {
		if m := c.method(t, named.Method(i)); m.Rule != nil {
			d.Methods = append(d.Methods, m)
		}
	}
	if !c.embeddable(t, d) {
		return nil
	}
	slices.SortFunc(d.Methods, func(a, b *model.Method) int { return cmp.Compare(a.Name, b.Name) })
	return d
}

// method returns the decorator method for fn, limited by fn's own
// directives, or else by the type's.
func (c *collector) method(t *target, fn *types.Func) *model.Method {
	m := &model.Method{Name: fn.Name(), Sig: fn.Signature()}
	dirs, owner := t.typeDirs, t.obj
	if md := c.methods[fn.Origin()]; md != nil {
		dirs, owner = md.dirs, md.owner
	}
	if len(dirs) == 0 {
		return m
	}
	if owner == t.obj && c.methods[fn.Origin()] == nil {
		t.typeDirsUsed = true
	}
	own, shared := c.sharedLines(t, fn, dirs)
	if len(own)+len(shared) == 0 {
		return m
	}
	rc := &ruleChecker{c: c, where: t.obj.Name() + "." + fn.Name(), sig: m.Sig, dirs: append(own, shared...), pos: dirs[0].Pos}
	m.Rule = rc.rule(c.pkg.Path + "." + owner.Name() + "." + fn.Name())
	if m.Rule != nil {
		for i := len(own); i < len(m.Rule.Limits); i++ {
			m.Rule.Limits[i].Shared = model.SharedLineName(c.pkg.Path, rc.dirs[i].Shared)
		}
	}
	return m
}

// checkSharedNames reports methods that share a limit name but declare
// different limits: they would share counters under different rules.
func (c *collector) checkSharedNames(f *model.File) {
	type use struct {
		where  string
		pos    token.Position
		limits []model.Limit
	}
	seen := map[string]use{}
	for _, d := range f.Decorators {
		for _, m := range d.Methods {
			if m.Rule == nil {
				continue
			}
			where := d.Type.Obj().Name() + "." + m.Name
			prev, ok := seen[m.Rule.Name]
			if !ok {
				seen[m.Rule.Name] = use{where, m.Rule.Pos, m.Rule.Limits}
				continue
			}
			if !slices.EqualFunc(prev.limits, m.Rule.Limits, sameLimit) {
				c.errorf(m.Rule.Pos, "%s and %s share the limit name %q but declare different limits; methods sharing a name must declare the same limits", prev.where, where, m.Rule.Name).
					AddNote(prev.pos, "limits of %s", prev.where)
			}
		}
	}
}

// sameLimit reports whether two limits are the same wherever they are
// written.
func sameLimit(a, b model.Limit) bool {
	a.Pos, b.Pos = token.Position{}, token.Position{}
	a.Key, b.Key = nil, nil
	return a == b
}

// methodFuncs returns the methods of a named type: its method set for an
// interface, its declared methods otherwise.
func methodFuncs(named *types.Named) []*types.Func {
	var out []*types.Func
	if iface, ok := named.Underlying().(*types.Interface); ok {
		for i := 0; i < iface.NumMethods(); i++ {
			out = append(out, iface.Method(i))
		}
		return out
	}
	for i := 0; i < named.NumMethods(); i++ {
		out = append(out, named.Method(i))
	}
	return out
}
