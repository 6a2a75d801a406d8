package check

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// valueWalk resolves a key= or cost= expression: an operand (a
// parameter, a function call or len), then its selectors one at a time.
type valueWalk struct {
	rc          *ruleChecker
	arg         parser.Arg
	v           *model.Value
	t           types.Type // type of the value reached so far
	addressable bool       // whether that value is addressable
	spelled     string     // the value reached so far, as the directive spells it
}

// value resolves e, a part of a.Value, as Go would in the method: a
// parameter, a function of the package, len, or a function of a package
// the directive's file imports, followed by selectors. Every selector
// must be a field, or a method without arguments returning one value;
// pointers and interfaces on the way are checked for nil, except before
// a protobuf getter, which returns the zero value for a nil message. A
// function takes such values as arguments and returns one value,
// optionally with an error.
func (rc *ruleChecker) value(a parser.Arg, e *parser.Expr) *valueWalk {
	parts := e.Parts
	first := parts[0]
	var w *valueWalk
	switch {
	case first.Call:
		w = rc.call(a, e, nil, 0)
		parts = parts[1:]
	case rc.param(first.Name) >= 0:
		i := rc.param(first.Name)
		w = &valueWalk{
			rc: rc, arg: a,
			v:           &model.Value{Param: i},
			t:           rc.scope().At(i).Type(),
			addressable: true,
			spelled:     first.Name,
		}
		parts = parts[1:]
	default:
		pkg := rc.imported(a, e)
		if pkg == nil {
			return nil
		}
		w = rc.call(a, e, pkg, 1)
		parts = parts[2:]
	}
	if w == nil {
		return nil
	}
	for _, p := range parts {
		if !w.selector(p) {
			return nil
		}
	}
	w.v.Source = e.String()
	return w
}

// posAt returns the position of the byte at offset of a's value, quotes
// removed.
func (rc *ruleChecker) posAt(a parser.Arg, offset int) token.Position {
	pos := a.ValuePos
	if a.Quoted {
		offset++ // the opening quote
	}
	pos.Column += offset
	pos.Offset += offset
	return pos
}

// spelledTo returns e's parts up to and including parts[k], as written.
func spelledTo(e *parser.Expr, k int) string {
	return (&parser.Expr{Parts: e.Parts[:k+1]}).String()
}

// imported returns the package that e's first identifier names in the
// directive's file, when e goes on with a call of one of its functions,
// or nil after reporting what is wrong.
func (rc *ruleChecker) imported(a parser.Arg, e *parser.Expr) *types.Package {
	first := e.Parts[0]
	pos := rc.posAt(a, first.Offset)
	file := a.ValuePos.Filename
	pkg, ambiguous := rc.c.importedAs(file, first.Name)
	switch {
	case len(ambiguous) > 1:
		rc.errorf(pos, "%s=%s: %s names more than one package %s imports (%s); import the one to call under a name of its own", a.Name, a.Value, first.Name, shortName(file), strings.Join(ambiguous, ", "))
		return nil
	case pkg != nil && (len(e.Parts) < 2 || !e.Parts[1].Call):
		rc.errorf(pos, "%s=%s: %s is a package; call one of its functions, as in %s.F(ctx)", a.Name, a.Value, first.Name, first.Name)
		return nil
	case pkg != nil:
		return pkg
	}
	if fn, ok := rc.c.pkg.Types.Scope().Lookup(first.Name).(*types.Func); ok {
		rc.errorf(pos, "%s=%s: %s is a function; call it, as in %s(%s)", a.Name, a.Value, first.Name, first.Name, rc.argNames(fn))
		return nil
	}
	if len(e.Parts) < 2 || !e.Parts[1].Call {
		rc.errorf(pos, "%s=%s: %s has no %s %s (%s)", a.Name, a.Value, rc.where, rc.noun(), first.Name, rc.paramNames())
		return nil
	}
	msg := fmt.Sprintf("%s=%s: %s is neither a %s of %s (%s) nor a package imported by %s", a.Name, a.Value, first.Name, rc.noun(), rc.where, rc.paramNames(), shortName(file))
	if path := rc.c.importedElsewhere(first.Name); path != "" {
		msg += fmt.Sprintf(`; import it there: import _ %q (a directive is a comment, so only the generated file uses it)`, path)
	}
	rc.errorf(pos, "%s", msg)
	return nil
}

// argNames lists the parameter names of fn, for a message.
func (rc *ruleChecker) argNames(fn *types.Func) string {
	params := fn.Signature().Params()
	names := make([]string, params.Len())
	for i := range names {
		names[i] = cmp.Or(params.At(i).Name(), "x")
	}
	return strings.Join(names, ", ")
}

// call resolves the call in e.Parts[k]: of a function of pkg, or, when pkg
// is nil, of the package or of the builtin len.
func (rc *ruleChecker) call(a parser.Arg, e *parser.Expr, pkg *types.Package, k int) *valueWalk {
	part := e.Parts[k]
	pos := rc.posAt(a, e.Parts[0].Offset)
	name := spelledTo(e, k)
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = name[:i]
	}
	scope, what := rc.c.pkg.Types.Scope(), "package "+rc.c.pkg.Name
	if pkg != nil {
		scope, what = pkg.Scope(), "package "+pkg.Path()
	}
	obj := scope.Lookup(part.Name)
	if pkg == nil && part.Name == "len" && obj == nil {
		return rc.length(a, e, part)
	}
	fn, ok := obj.(*types.Func)
	switch {
	case pkg == nil && !ok && rc.param(part.Name) >= 0:
		rc.errorf(pos, "%s=%s: %s is a %s, not a function of the package; %s", a.Name, a.Value, part.Name, rc.noun(), parser.Accepted)
		return nil
	case !ok || pkg != nil && !fn.Exported():
		rc.errorf(pos, "%s=%s: %s declares no function %s", a.Name, a.Value, what, part.Name)
		return nil
	}
	sig := fn.Signature()
	res := sig.Results()
	switch {
	case sig.TypeParams().Len() > 0:
		rc.errorf(pos, "%s=%s: %s is generic; want a function without type parameters", a.Name, a.Value, name)
		return nil
	case sig.Variadic():
		rc.errorf(pos, "%s=%s: %s is variadic; want a function with fixed parameters", a.Name, a.Value, name)
		return nil
	case sig.Params().Len() != len(part.Args):
		rc.errorf(pos, "%s=%s: %s takes %d arguments, not %d", a.Name, a.Value, name, sig.Params().Len(), len(part.Args))
		return nil
	case res.Len() == 0 || res.Len() > 2 || res.Len() == 2 && !types.Identical(res.At(1).Type(), errorType):
		rc.errorf(pos, "%s=%s: %s must return one value, or a value and an error", a.Name, a.Value, name)
		return nil
	}
	f := &model.Func{Obj: fn, Error: res.Len() == 2}
	for i, arg := range part.Args {
		w := rc.value(a, arg)
		if w == nil {
			return nil
		}
		if want := sig.Params().At(i).Type(); !types.AssignableTo(w.t, want) {
			rc.errorf(rc.posAt(a, arg.Offset()), "%s=%s: argument %s has type %s, but parameter %d of %s has type %s", a.Name, a.Value, w.spelled, rc.c.typeString(w.t), i+1, name, rc.c.typeString(want))
			return nil
		}
		f.Args = append(f.Args, *w.v)
	}
	return &valueWalk{
		rc: rc, arg: a,
		v:       &model.Value{Param: -1, Func: f},
		t:       res.At(0).Type(),
		spelled: spelledTo(e, k),
	}
}

// length resolves len(x) of a slice, a map, a string or an array.
func (rc *ruleChecker) length(a parser.Arg, e *parser.Expr, part parser.Part) *valueWalk {
	pos := rc.posAt(a, part.Offset)
	if len(part.Args) != 1 {
		rc.errorf(pos, "%s=%s: len takes one argument, not %d", a.Name, a.Value, len(part.Args))
		return nil
	}
	w := rc.value(a, part.Args[0])
	if w == nil {
		return nil
	}
	ok := false
	if _, tp := types.Unalias(w.t).(*types.TypeParam); !tp {
		switch u := w.t.Underlying().(type) {
		case *types.Slice, *types.Map, *types.Array:
			ok = true
		case *types.Basic:
			ok = u.Info()&types.IsString != 0
		}
	}
	if !ok {
		rc.errorf(pos, "%s=%s: %s has type %s; len takes a slice, a map, a string or an array", a.Name, a.Value, w.spelled, rc.c.typeString(w.t))
		return nil
	}
	return &valueWalk{
		rc: rc, arg: a,
		v:       &model.Value{Param: -1, Len: w.v},
		t:       types.Typ[types.Int],
		spelled: spelledTo(e, 0),
	}
}

// importedAs returns the package that file imports under name: an import
// called name, or else a blank import (import _ "path") of a package
// called name, which a file writes when only directives use the package.
// When several blank imports are called name, it returns their paths
// instead.
func (c *collector) importedAs(file, name string) (*types.Package, []string) {
	var blank []*types.Package
	for _, f := range c.pkg.Syntax {
		if c.pkg.Fset.Position(f.Package).Filename != file {
			continue
		}
		for _, imp := range f.Imports {
			pn := c.pkgName(imp)
			switch {
			case pn == nil || pn.Name() == ".":
			case pn.Name() == name:
				return pn.Imported(), nil
			case pn.Name() == "_" && pn.Imported().Name() == name:
				blank = append(blank, pn.Imported())
			}
		}
	}
	switch len(blank) {
	case 0:
		return nil, nil
	case 1:
		return blank[0], nil
	}
	var paths []string
	for _, p := range blank {
		paths = append(paths, p.Path())
	}
	return nil, paths
}

// importedElsewhere returns the path of a package that a file of the
// package imports as name, or "".
func (c *collector) importedElsewhere(name string) string {
	for _, f := range c.pkg.Syntax {
		for _, imp := range f.Imports {
			pn := c.pkgName(imp)
			if pn != nil && pn.Imported().Name() == name {
				return pn.Imported().Path()
			}
		}
	}
	return ""
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

// selector resolves the selector p on the value reached so far.
func (w *valueWalk) selector(p parser.Part) bool {
	name := p.Name
	pos := w.rc.posAt(w.arg, p.Offset)
	obj, index, indirect := types.LookupFieldOrMethod(w.t, w.addressable, w.rc.c.pkg.Types, name)
	if obj == nil {
		why := "has no field or method " + name
		switch {
		case index != nil:
			why = "has more than one field or method " + name + " at the same depth"
		case indirect:
			why = "is not addressable, so its pointer method " + name + " cannot be called"
		}
		w.rc.errorf(pos, "%s=%s: %s (type %s) %s", w.arg.Name, w.arg.Value, w.spelled, w.rc.c.typeString(w.t), why)
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
		if p.Call {
			w.rc.errorf(pos, "%s=%s: %s.%s is a field, not a method: write it without ()", w.arg.Name, w.arg.Value, w.spelled, name)
			return false
		}
		w.step(model.Step{Name: name}, obj.Type())
	case *types.Func:
		sig := obj.Signature()
		switch {
		case len(p.Args) > 0:
			w.rc.errorf(pos, "%s=%s: method %s.%s is called with arguments; a key or a cost calls methods without arguments (a function of the package takes arguments)", w.arg.Name, w.arg.Value, w.spelled, name)
			return false
		case sig.Params().Len() != 0 || sig.Results().Len() != 1:
			w.rc.errorf(pos, "%s=%s: method %s.%s must take no arguments and return one value", w.arg.Name, w.arg.Value, w.spelled, name)
			return false
		}
		s := model.Step{Name: name, Call: true}
		if protoGetter(w.t, obj) {
			w.stepNilSafe(s, sig.Results().At(0).Type())
		} else {
			w.step(s, sig.Results().At(0).Type())
		}
	}
	return true
}

// protoGetter reports whether fn, a method of t, is a getter of a
// message generated by protoc-gen-go (or gogo): a Get method of the
// pointer type t, which also has the ProtoMessage method all generated
// messages have. Such a getter returns the zero value when the message
// is nil.
func protoGetter(t types.Type, fn *types.Func) bool {
	if !strings.HasPrefix(fn.Name(), "Get") || !isPointer(t) || !types.Identical(fn.Signature().Recv().Type(), t) {
		return false
	}
	obj, _, _ := types.LookupFieldOrMethod(t, false, nil, "ProtoMessage")
	marker, ok := obj.(*types.Func)
	if !ok {
		return false
	}
	sig := marker.Signature()
	return sig.Params().Len() == 0 && sig.Results().Len() == 0 && types.Identical(sig.Recv().Type(), t)
}

// stepNilSafe records s, which needs no nil check, from the current value
// to a value of type next.
func (w *valueWalk) stepNilSafe(s model.Step, next types.Type) {
	w.step(s, next)
	w.v.Steps[len(w.v.Steps)-1].CheckNil = false
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
