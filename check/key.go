package check

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// valueWalk resolves a key= or cost= expression: a path one selector at a
// time, or a function call.
type valueWalk struct {
	rc          *ruleChecker
	arg         parser.Arg
	offset      int // of the expression being walked in arg.Value
	v           *model.Value
	t           types.Type // type of the value reached so far
	addressable bool       // whether that value is addressable
	spelled     string     // the value reached so far, as the directive spells it
}

// value resolves e, written as a.Value. A path starts from a parameter;
// every selector must be a field or a method without arguments returning
// one value; pointers and interfaces on the way are checked for nil. A
// call is of a function of the package or of a package the directive's
// file imports, with paths as arguments, returning one value and
// optionally an error.
func (rc *ruleChecker) value(a parser.Arg, e *parser.Expr) *valueWalk {
	if e.Call {
		return rc.call(a, e)
	}
	return rc.path(a, e.Path, 0)
}

// path resolves a path that starts at byte offset of a.Value.
func (rc *ruleChecker) path(a parser.Arg, path []string, offset int) *valueWalk {
	i := rc.param(path[0])
	if i < 0 {
		rc.errorf(a.ValuePos, "%s=%s: %s has no parameter %s (%s)", a.Name, a.Value, rc.where, path[0], rc.paramNames())
		return nil
	}
	w := &valueWalk{
		rc: rc, arg: a, offset: offset,
		v:           &model.Value{Param: i, Source: strings.Join(path, ".")},
		t:           rc.sig.Params().At(i).Type(),
		addressable: true,
		spelled:     path[0],
	}
	for j := 1; j < len(path); j++ {
		if !w.selector(path, j) {
			return nil
		}
	}
	return w
}

// call resolves a function call.
func (rc *ruleChecker) call(a parser.Arg, e *parser.Expr) *valueWalk {
	fn := rc.function(a, e.Path)
	if fn == nil {
		return nil
	}
	sig := fn.Signature()
	name := strings.Join(e.Path, ".")
	res := sig.Results()
	switch {
	case sig.TypeParams().Len() > 0:
		rc.errorf(a.ValuePos, "%s=%s: %s is generic; want a function without type parameters", a.Name, a.Value, name)
		return nil
	case sig.Variadic():
		rc.errorf(a.ValuePos, "%s=%s: %s is variadic; want a function with fixed parameters", a.Name, a.Value, name)
		return nil
	case sig.Params().Len() != len(e.Args):
		rc.errorf(a.ValuePos, "%s=%s: %s takes %d arguments, not %d", a.Name, a.Value, name, sig.Params().Len(), len(e.Args))
		return nil
	case res.Len() == 0 || res.Len() > 2 || res.Len() == 2 && !types.Identical(res.At(1).Type(), errorType):
		rc.errorf(a.ValuePos, "%s=%s: %s must return one value, or a value and an error", a.Name, a.Value, name)
		return nil
	}
	f := &model.Func{Obj: fn, Error: res.Len() == 2}
	for i, argPath := range e.Args {
		spelled := strings.Join(argPath, ".")
		w := rc.path(a, argPath, max(strings.Index(a.Value, spelled), 0))
		if w == nil {
			return nil
		}
		if want := sig.Params().At(i).Type(); !types.AssignableTo(w.t, want) {
			rc.errorf(w.pos(0), "%s=%s: argument %s has type %s, but parameter %d of %s has type %s", a.Name, a.Value, w.spelled, rc.c.typeString(w.t), i+1, name, rc.c.typeString(want))
			return nil
		}
		f.Args = append(f.Args, *w.v)
	}
	return &valueWalk{
		rc: rc, arg: a,
		v:       &model.Value{Param: -1, Func: f, Source: e.String()},
		t:       res.At(0).Type(),
		spelled: e.String(),
	}
}

// function finds the function that path (name, or package.Name) names.
func (rc *ruleChecker) function(a parser.Arg, path []string) *types.Func {
	scope, what := rc.c.pkg.Types.Scope(), "package "+rc.c.pkg.Name
	if len(path) == 2 {
		imported := rc.c.importedAs(a.ValuePos.Filename, path[0])
		if imported == nil {
			rc.errorf(a.ValuePos, "%s=%s: %s is not a package imported by %s", a.Name, a.Value, path[0], shortName(a.ValuePos.Filename))
			return nil
		}
		scope, what = imported.Scope(), "package "+imported.Path()
	}
	name := path[len(path)-1]
	fn, ok := scope.Lookup(name).(*types.Func)
	if !ok || len(path) == 2 && !fn.Exported() {
		rc.errorf(a.ValuePos, "%s=%s: %s declares no function %s", a.Name, a.Value, what, name)
		return nil
	}
	return fn
}

// importedAs returns the package that file imports under name, or nil.
func (c *collector) importedAs(file, name string) *types.Package {
	for _, f := range c.pkg.Syntax {
		if c.pkg.Fset.Position(f.Package).Filename != file {
			continue
		}
		for _, imp := range f.Imports {
			if pn := c.pkgName(imp); pn != nil && pn.Name() == name {
				return pn.Imported()
			}
		}
	}
	return nil
}

func (c *collector) pkgName(imp *ast.ImportSpec) *types.PkgName {
	if imp.Name != nil {
		pn, _ := c.pkg.Info.Defs[imp.Name].(*types.PkgName)
		return pn
	}
	pn, _ := c.pkg.Info.Implicits[imp].(*types.PkgName)
	return pn
}

func shortName(file string) string {
	if i := strings.LastIndexAny(file, `/\`); i >= 0 {
		return file[i+1:]
	}
	return file
}

// pos returns the position of path segment j of the walked path.
func (w *valueWalk) pos(j int) token.Position {
	pos := w.arg.ValuePos
	n := w.offset
	for _, s := range strings.Split(w.v.Source, ".")[:j] {
		n += len(s) + 1
	}
	if w.arg.Quoted && n > 0 {
		n++ // the opening quote
	}
	pos.Column += n
	pos.Offset += n
	return pos
}

// selector resolves path[j] on the value reached so far.
func (w *valueWalk) selector(path []string, j int) bool {
	name := path[j]
	obj, index, indirect := types.LookupFieldOrMethod(w.t, w.addressable, w.rc.c.pkg.Types, name)
	if obj == nil {
		why := "has no field or method " + name
		switch {
		case index != nil:
			why = "has more than one field or method " + name + " at the same depth"
		case indirect:
			why = "is not addressable, so its pointer method " + name + " cannot be called"
		}
		w.rc.errorf(w.pos(j), "%s=%s: %s (type %s) %s", w.arg.Name, w.arg.Value, w.spelled, w.rc.c.typeString(w.t), why)
		return false
	}
	// Walk the embedded fields the selector goes through, so that each
	// pointer among them is checked.
	for _, fi := range index[:len(index)-1] {
		st, _ := deref(w.t).Underlying().(*types.Struct)
		if st == nil {
			break
		}
		f := st.Field(fi)
		w.step(model.Step{Name: f.Name()}, f.Type())
	}
	switch obj := obj.(type) {
	case *types.Var:
		w.step(model.Step{Name: name}, obj.Type())
	case *types.Func:
		sig := obj.Signature()
		if sig.Params().Len() != 0 || sig.Results().Len() != 1 {
			w.rc.errorf(w.pos(j), "%s=%s: method %s.%s must take no arguments and return one value", w.arg.Name, w.arg.Value, w.spelled, name)
			return false
		}
		w.step(model.Step{Name: name, Call: true}, sig.Results().At(0).Type())
	}
	return true
}

// step records s from the current value to a value of type next.
func (w *valueWalk) step(s model.Step, next types.Type) {
	s.CheckNil, s.Path = nillable(w.t), w.spelled
	w.v.Steps = append(w.v.Steps, s)
	w.addressable = !s.Call && (w.addressable || isPointer(w.t))
	w.t = next
	switch {
	case s.Deref:
		w.spelled = "*" + w.spelled
	case s.Call:
		w.spelled += "." + s.Name + "()"
	default:
		w.spelled += "." + s.Name
	}
}

// key returns the key of the walked value, picking how it becomes a
// string: a string or an integer (through a pointer too, which is checked
// for nil), a type parameter whose types are all strings or all signed or
// all unsigned integers, or a fmt.Stringer.
func (w *valueWalk) key() *model.Key {
	if p, ok := w.t.Underlying().(*types.Pointer); ok {
		if _, ok := keyFormat(p.Elem()); ok {
			w.step(model.Step{Deref: true}, p.Elem())
		}
	}
	if f, ok := keyFormat(w.t); ok {
		return &model.Key{Value: *w.v, Format: f}
	}
	obj, _, _ := types.LookupFieldOrMethod(w.t, w.addressable, w.rc.c.pkg.Types, "String")
	if fn, ok := obj.(*types.Func); ok && isStringer(fn.Signature()) {
		w.step(model.Step{Name: "String", Call: true}, types.Typ[types.String])
		return &model.Key{Value: *w.v, Format: model.KeyString}
	}
	w.rc.errorf(w.arg.ValuePos, "%s=%s: %s has type %s; want a string, an integer or a fmt.Stringer", w.arg.Name, w.arg.Value, w.spelled, w.rc.c.typeString(w.t))
	return nil
}

// cost returns the walked value as a cost: it must be an integer.
func (w *valueWalk) cost() (v *model.Value, convert bool) {
	f, ok := keyFormat(w.t)
	if !ok || f == model.KeyString || f == model.KeyStringConv {
		w.rc.errorf(w.arg.ValuePos, "%s=%s: %s has type %s; want an integer type", w.arg.Name, w.arg.Value, w.spelled, w.rc.c.typeString(w.t))
		return nil, false
	}
	return w.v, !types.Identical(w.t, types.Typ[types.Int64])
}

// keyFormat returns the conversion of a string or integer type, or of a
// type parameter all of whose types are strings, signed integers or
// unsigned integers.
func keyFormat(t types.Type) (model.KeyFormat, bool) {
	if tp, ok := types.Unalias(t).(*types.TypeParam); ok {
		return typeParamFormat(tp)
	}
	b, ok := t.Underlying().(*types.Basic)
	if !ok {
		return 0, false
	}
	info := b.Info()
	switch {
	case info&types.IsString != 0 && types.Identical(t, types.Typ[types.String]):
		return model.KeyString, true
	case info&types.IsString != 0:
		return model.KeyStringConv, true
	case info&types.IsInteger != 0 && info&types.IsUnsigned != 0 && types.Identical(t, types.Typ[types.Uint64]):
		return model.KeyUint64, true
	case info&types.IsInteger != 0 && info&types.IsUnsigned != 0:
		return model.KeyUint, true
	case info&types.IsInteger != 0 && types.Identical(t, types.Typ[types.Int64]):
		return model.KeyInt64, true
	case info&types.IsInteger != 0:
		return model.KeyInt, true
	}
	return 0, false
}

// typeParamFormat returns the conversion every type of tp's type set
// takes: string(x), int64(x) or uint64(x).
func typeParamFormat(tp *types.TypeParam) (model.KeyFormat, bool) {
	terms := typeTerms(tp.Constraint())
	if len(terms) == 0 {
		return 0, false
	}
	var want model.KeyFormat
	for i, t := range terms {
		f, ok := keyFormat(t.Underlying())
		switch f {
		case model.KeyString:
			f = model.KeyStringConv
		case model.KeyInt64:
			f = model.KeyInt
		case model.KeyUint64:
			f = model.KeyUint
		}
		if !ok || i > 0 && f != want {
			return 0, false
		}
		want = f
	}
	return want, true
}

// typeTerms returns the types of the union terms of a constraint, through
// embedded constraints; nil when it has a method or no terms.
func typeTerms(constraint types.Type) []types.Type {
	iface, ok := constraint.Underlying().(*types.Interface)
	if !ok || iface.NumMethods() > 0 {
		return nil
	}
	var out []types.Type
	for i := 0; i < iface.NumEmbeddeds(); i++ {
		switch e := iface.EmbeddedType(i).(type) {
		case *types.Union:
			for j := 0; j < e.Len(); j++ {
				if sub := typeTerms(e.Term(j).Type()); sub != nil {
					out = append(out, sub...)
				} else {
					out = append(out, e.Term(j).Type())
				}
			}
		default:
			if types.IsInterface(e) {
				out = append(out, typeTerms(e)...)
			} else {
				out = append(out, e)
			}
		}
	}
	return out
}

func isStringer(sig *types.Signature) bool {
	return sig.Params().Len() == 0 && sig.Results().Len() == 1 &&
		types.Identical(sig.Results().At(0).Type(), types.Typ[types.String])
}

// nillable reports whether a value of type t must be checked for nil
// before a selector: pointers, and interfaces (whose methods panic on nil).
func nillable(t types.Type) bool {
	if _, ok := types.Unalias(t).(*types.TypeParam); ok {
		return false
	}
	switch t.Underlying().(type) {
	case *types.Pointer, *types.Interface:
		return true
	}
	return false
}

func isPointer(t types.Type) bool {
	_, ok := t.Underlying().(*types.Pointer)
	return ok
}

func deref(t types.Type) types.Type {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}
