package check

import (
	"go/token"
	"go/types"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// keyWalk resolves a key= path one selector at a time.
type keyWalk struct {
	rc          *ruleChecker
	arg         parser.Arg
	path        []string
	key         *model.Key
	t           types.Type // type of the value reached so far
	addressable bool       // whether that value is addressable
	spelled     string     // the value reached so far, as the directive spells it
}

// key resolves key=<param>[.<field or method>...]: the parameter must
// exist, every selector must be a field or a method without arguments
// returning one value, and the value must be a string, an integer or a
// fmt.Stringer. Pointers and interfaces on the way are checked for nil.
func (rc *ruleChecker) key(a parser.Arg, path []string) *model.Key {
	i := rc.param(path[0])
	if i < 0 {
		rc.errorf(a.ValuePos, "key=%s: %s has no parameter %s (%s)", a.Value, rc.where, path[0], rc.paramNames())
		return nil
	}
	w := &keyWalk{
		rc: rc, arg: a, path: path,
		key:         &model.Key{Param: i, Source: strings.Join(path, ".")},
		t:           rc.sig.Params().At(i).Type(),
		addressable: true,
		spelled:     path[0],
	}
	for j := 1; j < len(path); j++ {
		if !w.selector(j) {
			return nil
		}
	}
	if !w.format() {
		return nil
	}
	return w.key
}

// segmentPos returns the position of path[j] in the directive.
func (w *keyWalk) segmentPos(j int) token.Position {
	pos := w.arg.ValuePos
	for _, s := range w.path[:j] {
		pos.Column += len(s) + 1
		pos.Offset += len(s) + 1
	}
	return pos
}

// selector resolves path[j] on the value reached so far.
func (w *keyWalk) selector(j int) bool {
	name := w.path[j]
	obj, index, indirect := types.LookupFieldOrMethod(w.t, w.addressable, w.rc.c.pkg.Types, name)
	if obj == nil {
		why := "has no field or method " + name
		switch {
		case index != nil:
			why = "has more than one field or method " + name + " at the same depth"
		case indirect:
			why = "is not addressable, so its pointer method " + name + " cannot be called"
		}
		w.rc.errorf(w.segmentPos(j), "key=%s: %s (type %s) %s", w.arg.Value, w.spelled, w.rc.c.typeString(w.t), why)
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
		w.step(f.Name(), false, f.Type())
	}
	switch obj := obj.(type) {
	case *types.Var:
		w.step(name, false, obj.Type())
	case *types.Func:
		sig := obj.Signature()
		if sig.Params().Len() != 0 || sig.Results().Len() != 1 {
			w.rc.errorf(w.segmentPos(j), "key=%s: method %s.%s must take no arguments and return one value", w.arg.Value, w.spelled, name)
			return false
		}
		w.step(name, true, sig.Results().At(0).Type())
	}
	return true
}

// step records a selector from the current value to a value of type next.
func (w *keyWalk) step(name string, call bool, next types.Type) {
	w.key.Steps = append(w.key.Steps, model.Step{
		Name: name, Call: call, CheckNil: nillable(w.t), Path: w.spelled,
	})
	w.addressable = !call && (w.addressable || isPointer(w.t))
	w.t = next
	w.spelled += "." + name
	if call {
		w.spelled += "()"
	}
}

// format picks how the final value becomes a string.
func (w *keyWalk) format() bool {
	if f, ok := keyFormat(w.t); ok {
		w.key.Format = f
		return true
	}
	obj, _, _ := types.LookupFieldOrMethod(w.t, w.addressable, w.rc.c.pkg.Types, "String")
	if fn, ok := obj.(*types.Func); ok && isStringer(fn.Signature()) {
		w.step("String", true, types.Typ[types.String])
		w.key.Format = model.KeyString
		return true
	}
	w.rc.errorf(w.arg.ValuePos, "key=%s: %s has type %s; want a string, an integer or a fmt.Stringer", w.arg.Value, w.spelled, w.rc.c.typeString(w.t))
	return false
}

// keyFormat returns the conversion of a string or integer type.
func keyFormat(t types.Type) (model.KeyFormat, bool) {
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
