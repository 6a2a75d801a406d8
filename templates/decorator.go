package templates

import (
	"go/types"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// decoratorPlan is a decorator with the names it is written with.
type decoratorPlan struct {
	*model.Decorator
	name, ctor string   // the decorator type and its constructor
	tparams    []string // type parameter names
	next       string   // field holding the wrapped value (the embedded type's name for a non-interface)
	limiter    string   // field holding the limiter
	recv       string   // receiver name of every method
	methods    []*methodPlan
}

// methodPlan is a method with the name of its rule variable.
type methodPlan struct {
	*model.Method
	rule string // empty when the method is not limited
}

// planDecorator allocates the package-level names of d: its type and its
// constructor (fixed names are reserved already), and its rule variables.
func (r *renderer) planDecorator(d *model.Decorator) *decoratorPlan {
	typeName := d.Type.Obj().Name()
	p := &decoratorPlan{Decorator: d, name: d.Name, ctor: d.Constructor}
	if !d.Fixed {
		p.name = r.pkg.fresh(d.Name)
		p.ctor = r.pkg.fresh(model.ConstructorName(p.name))
	}
	for _, m := range d.Methods {
		mp := &methodPlan{Method: m}
		if m.Rule != nil {
			mp.rule = r.pkg.fresh(model.RuleVarName(typeName, m.Name))
		}
		p.methods = append(p.methods, mp)
	}
	return p
}

// planMembers names what is declared inside the decorator: its type
// parameters, fields and receiver.
func (r *renderer) planMembers(p *decoratorPlan) {
	// Type parameters keep their names unless a generated name or an
	// import of this file would be shadowed by them.
	tps := newNames(func(s string) bool { return r.pkg.taken[s] })
	for i := 0; i < p.Type.TypeParams().Len(); i++ {
		p.tparams = append(p.tparams, tps.fresh(p.Type.TypeParams().At(i).Obj().Name()))
	}
	if !p.Embed {
		// A field may not share its name with a method.
		fields := newNames(func(s string) bool { return p.hasMethod(s) })
		p.next = fields.first("next", "wrapped")
		p.limiter = fields.first("limiter", "rateLimiter")
	} else {
		// The limiter field must not hide a field or method promoted from
		// the embedded value.
		p.next = p.Type.Obj().Name()
		fields := newNames(func(s string) bool {
			obj, _, _ := types.LookupFieldOrMethod(p.embedded(), false, p.Type.Obj().Pkg(), s)
			return s == p.next || obj != nil
		})
		p.limiter = fields.first("limiter", "rateLimiter")
	}
	recv := newNames(func(s string) bool { return r.pkg.isTaken(s) || p.usesParamName(s) })
	recv.reserve(p.tparams...)
	p.recv = recv.first("d", "w", "dec")
}

// embedded returns the type of the embedded wrapped value: the interface,
// or a pointer to any other type.
func (p *decoratorPlan) embedded() types.Type {
	if p.Interface() {
		return p.Type
	}
	return types.NewPointer(p.Type)
}

func (p *decoratorPlan) hasMethod(name string) bool {
	for _, m := range p.Methods {
		if m.Name == name {
			return true
		}
	}
	return false
}

// usesParamName reports whether a method of p has a parameter called name.
func (p *decoratorPlan) usesParamName(name string) bool {
	for _, m := range p.Methods {
		for i := 0; i < m.Sig.Params().Len(); i++ {
			if m.Sig.Params().At(i).Name() == name {
				return true
			}
		}
	}
	return false
}

// limited returns the names of p's limited methods.
func (p *decoratorPlan) limited() []string {
	var out []string
	for _, m := range p.methods {
		if m.rule != "" {
			out = append(out, m.Name)
		}
	}
	return out
}

// typeParamList returns the type parameters with their constraints, for
// declaring the decorator and its constructor.
func (r *renderer) typeParamList(p *decoratorPlan) []jen.Code {
	tps := p.Type.TypeParams()
	out := make([]jen.Code, tps.Len())
	for i := range out {
		out[i] = jen.Id(p.tparams[i]).Add(r.types.typ(tps.At(i).Constraint()))
	}
	return out
}

// typeArgs returns the type parameters as arguments: Foo[K, V].
func (p *decoratorPlan) typeArgs() []jen.Code {
	out := make([]jen.Code, len(p.tparams))
	for i, n := range p.tparams {
		out[i] = jen.Id(n)
	}
	return out
}

// decoratedType returns the decorated type, instantiated with the
// decorator's type parameters.
func (r *renderer) decoratedType(p *decoratorPlan) *jen.Statement {
	return jen.Qual(r.f.PkgPath, p.Type.Obj().Name()).Types(p.typeArgs()...)
}

// selfType returns the decorator type, instantiated with its type
// parameters.
func (p *decoratorPlan) selfType() *jen.Statement {
	return jen.Id(p.name).Types(p.typeArgs()...)
}

// decorator appends everything generated for one decorated type.
func (r *renderer) decorator(g *jen.Group, p *decoratorPlan) {
	r.types.tparams = p.tparams
	r.typeDecl(g, p)
	g.Line()
	r.constructor(g, p)
	g.Line()
	if p.Interface() {
		r.assertion(g, p)
		g.Line()
	}
	for _, m := range p.methods {
		if m.rule != "" {
			r.ruleVar(g, p, m)
			g.Line()
		}
	}
	for _, m := range p.methods {
		r.method(g, p, m)
		g.Line()
	}
}

func (r *renderer) typeDecl(g *jen.Group, p *decoratorPlan) {
	typeName := p.Type.Obj().Name()
	limited := strings.Join(p.limited(), ", ")
	if p.Interface() && p.Embed {
		others := ""
		if len(p.limited()) < p.Type.Underlying().(*types.Interface).NumMethods() {
			others = " Other methods are promoted from the embedded " + typeName + " and are not limited."
		}
		doc(g, p.name+" is a "+typeName+" that asks a ratelimit.Limiter to admit each call of "+
			p.listing(limited)+" before calling the embedded "+typeName+". A denied call returns "+
			"the limiter's error, a *ratelimit.LimitError, without calling it."+p.recorded()+others+" It embeds "+
			typeName+" because another package's unexported method, which only the wrapped value "+
			"implements, is in its method set.")
		g.Type().Id(p.name).Types(r.typeParamList(p)...).Struct(
			r.decoratedType(p),
			jen.Id(p.limiter).Add(r.rt("Limiter")),
		)
		return
	}
	if p.Interface() {
		others := ""
		if len(p.limited()) < len(p.methods) {
			others = " Other methods call the wrapped " + typeName + " directly."
		}
		doc(g, p.name+" is a "+typeName+" that asks a ratelimit.Limiter to admit each call of "+
			p.listing(limited)+" before calling the wrapped "+typeName+". A denied call returns "+
			"the limiter's error, a *ratelimit.LimitError, without calling it."+p.recorded()+others)
		g.Type().Id(p.name).Types(r.typeParamList(p)...).Struct(
			jen.Id(p.next).Add(r.decoratedType(p)),
			jen.Id(p.limiter).Add(r.rt("Limiter")),
		)
		return
	}
	others := ""
	if len(p.limited()) < p.Type.NumMethods() {
		others = " Other methods are promoted from the embedded *" + typeName + " and are not limited."
	}
	doc(g, p.name+" is a *"+typeName+" that asks a ratelimit.Limiter to admit each call of "+
		p.listing(limited)+" before calling the embedded *"+typeName+"'s method. A denied call "+
		"returns the limiter's error, a *ratelimit.LimitError, without calling it."+p.recorded()+others+"\n\n"+
		"Only calls made through the "+p.name+" are limited: when a method of "+typeName+
		" calls another method of its own receiver, that call goes to the *"+typeName+
		" directly and bypasses the limit.")
	g.Type().Id(p.name).Types(r.typeParamList(p)...).Struct(
		jen.Op("*").Add(r.decoratedType(p)),
		jen.Id(p.limiter).Add(r.rt("Limiter")),
	)
}

// recorded returns what the doc of the decorator type says of the
// admissions of its calls: nothing when no limited method has a context.
func (p *decoratorPlan) recorded() string {
	if !p.hasContext() {
		return ""
	}
	return " An admitted call whose context comes from ratelimit.WithAdmission records its admission there."
}

// hasContext reports whether a limited method of p checks its calls with
// a context of its caller.
func (p *decoratorPlan) hasContext() bool {
	for _, m := range p.methods {
		if m.rule != "" && m.Rule.Context >= 0 {
			return true
		}
	}
	return false
}

// listing names the limited methods in prose.
func (p *decoratorPlan) listing(limited string) string {
	if len(p.limited()) == 1 {
		return "its limited method " + limited
	}
	return "its limited methods (" + limited + ")"
}

func (r *renderer) constructor(g *jen.Group, p *decoratorPlan) {
	typeName := p.Type.Obj().Name()
	params := newNames(func(s string) bool { return s == p.name })
	params.reserve(p.tparams...)
	next, limiter := params.fresh("next"), params.fresh("limiter")
	nextType := r.decoratedType(p)
	if !p.Interface() {
		nextType = jen.Op("*").Add(nextType)
	}
	doc(g, p.ctor+" returns a "+p.name+" that calls "+next+" after "+limiter+
		" admits each call of a limited method of "+typeName+". It panics if "+
		next+" or "+limiter+" is nil or holds a nil pointer, before anything is charged.")
	// A nil is a mistake in the program, found where it is made: a
	// panic here, naming the argument, as http.Handle panics on a nil
	// handler, rather than a nil dereference at the first call (after
	// the limiter charged it, for a nil next). An error result would
	// change the constructor every caller writes.
	// An interface argument is refused when it holds a nil pointer too
	// (a typed nil), which == nil lets through.
	refuse := func(arg string, iface bool, want string) jen.Code {
		isNil := jen.Id(arg).Op("==").Nil()
		if iface {
			isNil = jen.Id(r.isNil).Call(jen.Id(arg))
		}
		return jen.If(isNil).Block(
			jen.Panic(jen.Lit(r.f.PkgName + "." + p.ctor + ": " + arg + " is nil: want " + want)))
	}
	g.Func().Id(p.ctor).Types(r.typeParamList(p)...).
		Params(jen.Id(next).Add(nextType), jen.Id(limiter).Add(r.rt("Limiter"))).
		Op("*").Add(p.selfType()).
		Block(
			refuse(next, p.Interface(), "the "+typeName+" whose calls it limits"),
			refuse(limiter, true, "a ratelimit.Limiter, such as ratelimit.NewMemory()"),
			jen.Return(jen.Op("&").Add(p.selfType()).Values(
				jen.Id(p.next).Op(":").Id(next),
				jen.Id(p.limiter).Op(":").Id(limiter),
			)))
}

// assertion proves at compile time that the decorator implements the
// interface and the interfaces of other packages it embeds; a generic one
// does it inside a generic function.
func (r *renderer) assertion(g *jen.Group, p *decoratorPlan) {
	asserts := []jen.Code{r.assert(r.decoratedType(p), p)}
	for _, t := range p.Asserts {
		asserts = append(asserts, r.assert(r.types.typ(t), p))
	}
	if len(p.tparams) == 0 {
		for _, a := range asserts {
			g.Add(a)
		}
		return
	}
	g.Func().Id("_").Types(r.typeParamList(p)...).Params().Block(asserts...)
}

// assert returns var _ iface = (*Decorator)(nil).
func (r *renderer) assert(iface *jen.Statement, p *decoratorPlan) *jen.Statement {
	return jen.Var().Id("_").Add(iface).Op("=").Parens(jen.Op("*").Add(p.selfType())).Parens(jen.Nil())
}
