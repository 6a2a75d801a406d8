package main

import (
	"cmp"
	"go/types"
	"slices"

	"github.com/ratelimitgen/ratelimitgen/templates"
)

// build checks the collected directives against the types and returns the
// file to generate, or nil when there is nothing to generate, together with
// the limits found for -list.
func (c *collector) build() (*templates.File, []listRow) {
	f := &templates.File{PkgPath: c.pkg.PkgPath, PkgName: c.pkg.Name, Scope: c.pkg.Types.Scope()}
	var rows []listRow
	slices.SortFunc(c.targets, func(a, b *target) int { return cmp.Compare(a.obj.Name(), b.obj.Name()) })
	for _, t := range c.targets {
		d, drows := c.decorator(t)
		if d != nil {
			f.Decorators = append(f.Decorators, d)
			rows = append(rows, drows...)
		}
	}
	c.checkSharedNames(f)
	f.Constraint = c.constraint(f)
	if len(f.Decorators) == 0 {
		return nil, rows
	}
	return f, rows
}

// decorator returns the decorator of t, or nil after reporting why there
// cannot be one.
func (c *collector) decorator(t *target) (*templates.Decorator, []listRow) {
	named, ok := t.obj.Type().(*types.Named)
	if !ok {
		c.errorf(t.pos, "cannot decorate %s: not a named type", t.obj.Name())
		return nil, nil
	}
	if iface, ok := named.Underlying().(*types.Interface); ok {
		return c.interfaceDecorator(t, named, iface)
	}
	return c.concreteDecorator(t, named)
}

func (c *collector) interfaceDecorator(t *target, named *types.Named, iface *types.Interface) (*templates.Decorator, []listRow) {
	name := t.obj.Name()
	switch {
	case !iface.IsMethodSet():
		c.errorf(t.pos, "cannot decorate %s: an interface with type constraints is not the type of any value", name)
		return nil, nil
	case iface.NumMethods() == 0:
		c.errorf(t.pos, "cannot decorate %s: it has no methods", name)
		return nil, nil
	}
	d := &templates.Decorator{Type: named}
	var rows []listRow
	ok := true
	for i := 0; i < iface.NumMethods(); i++ {
		fn := iface.Method(i)
		if !fn.Exported() && fn.Pkg() != c.pkg.Types {
			c.errorf(t.pos, "cannot decorate %s: its method %s is unexported in package %s, so only that package can implement it", name, fn.Name(), fn.Pkg().Path())
			ok = false
			continue
		}
		m, mrows := c.method(t, fn)
		d.Methods = append(d.Methods, m)
		rows = append(rows, mrows...)
	}
	if !ok {
		return nil, nil
	}
	slices.SortFunc(d.Methods, func(a, b *templates.Method) int { return cmp.Compare(a.Name, b.Name) })
	return d, rows
}

func (c *collector) concreteDecorator(t *target, named *types.Named) (*templates.Decorator, []listRow) {
	name := t.obj.Name()
	if named.NumMethods() == 0 {
		c.errorf(t.pos, "cannot decorate %s: it has no methods", name)
		return nil, nil
	}
	d := &templates.Decorator{Type: named}
	var rows []listRow
	for i := 0; i < named.NumMethods(); i++ {
		fn := named.Method(i)
		m, mrows := c.method(t, fn)
		if m.Rule == nil {
			continue
		}
		if fn.Name() == name {
			c.errorf(t.pos, "cannot decorate %s: its method %s would clash with the field that embeds *%s", name, fn.Name(), name)
			return nil, nil
		}
		d.Methods = append(d.Methods, m)
		rows = append(rows, mrows...)
	}
	if len(d.Methods) == 0 {
		return nil, nil
	}
	slices.SortFunc(d.Methods, func(a, b *templates.Method) int { return cmp.Compare(a.Name, b.Name) })
	return d, rows
}

// method returns the decorator method for fn, limited by fn's own
// directives, or else by the type's.
func (c *collector) method(t *target, fn *types.Func) (*templates.Method, []listRow) {
	m := &templates.Method{Name: fn.Name(), Sig: fn.Signature()}
	dirs, owner := t.typeDirs, t.obj
	if md := c.methods[fn.Origin()]; md != nil {
		dirs, owner = md.dirs, md.owner
	}
	if len(dirs) == 0 {
		return m, nil
	}
	rc := &ruleChecker{c: c, where: t.obj.Name() + "." + fn.Name(), sig: m.Sig, dirs: dirs}
	m.Rule = rc.rule(c.pkg.PkgPath + "." + owner.Name() + "." + fn.Name())
	if m.Rule == nil {
		return m, nil
	}
	c.ruleAt[m] = dirs[0].Pos
	return m, listRows(c.pkg.PkgPath, t.obj.Name(), m, dirs)
}

// checkSharedNames reports methods that share a limit name but declare
// different limits: they would share counters under different rules.
func (c *collector) checkSharedNames(f *templates.File) {
	type use struct {
		where  string
		limits []templates.Limit
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
				seen[m.Rule.Name] = use{where, m.Rule.Limits}
				continue
			}
			if !slices.Equal(prev.limits, m.Rule.Limits) {
				c.errorf(c.ruleAt[m], "%s and %s share the limit name %q but declare different limits; methods sharing a name must declare the same limits", prev.where, where, m.Rule.Name)
			}
		}
	}
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
