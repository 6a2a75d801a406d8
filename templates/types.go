package templates

import (
	"fmt"
	"go/types"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// typeNames renders go/types types as jennifer code in the generated file:
// named types are qualified by import path (the file's import registry
// picks the names), and type parameters take the decorator's names for
// them, by index.
type typeNames struct {
	pkgPath string
	imports map[string]string // import path → name in the file
	tparams []string          // names of the current decorator's type parameters
	err     error             // the first type that could not be rendered
}

// typ returns the code of t.
func (r *typeNames) typ(t types.Type) *jen.Statement {
	switch t := t.(type) {
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			return jen.Qual("unsafe", "Pointer")
		}
		return jen.Id(t.Name())
	case *types.Alias:
		return r.named(t.Obj(), t.TypeArgs())
	case *types.Named:
		return r.named(t.Obj(), t.TypeArgs())
	case *types.TypeParam:
		return jen.Id(r.tparam(t))
	case *types.Pointer:
		return jen.Op("*").Add(r.typ(t.Elem()))
	case *types.Slice:
		return jen.Index().Add(r.typ(t.Elem()))
	case *types.Array:
		return jen.Index(jen.Id(strconv.FormatInt(t.Len(), 10))).Add(r.typ(t.Elem()))
	case *types.Map:
		return jen.Map(r.typ(t.Key())).Add(r.typ(t.Elem()))
	case *types.Chan:
		return r.chanType(t)
	case *types.Signature:
		return jen.Func().Add(r.signature(t, true))
	case *types.Struct:
		return r.structType(t)
	case *types.Interface:
		return r.interfaceType(t)
	case *types.Union:
		return r.union(t)
	}
	r.fail(fmt.Errorf("cannot render type %s", t))
	return jen.Id("_")
}

func (r *typeNames) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// named returns a reference to a named type or alias, with type arguments.
func (r *typeNames) named(obj *types.TypeName, targs *types.TypeList) *jen.Statement {
	var s *jen.Statement
	switch {
	case obj.Pkg() == nil:
		s = jen.Id(obj.Name()) // error, comparable, any
	case obj.Pkg().Path() != r.pkgPath && !obj.Exported():
		r.fail(fmt.Errorf("%s.%s is not exported, so the generated code cannot name it", obj.Pkg().Path(), obj.Name()))
		s = jen.Id(obj.Name())
	default:
		s = jen.Qual(obj.Pkg().Path(), obj.Name())
	}
	if targs.Len() > 0 {
		args := make([]jen.Code, targs.Len())
		for i := range args {
			args[i] = r.typ(targs.At(i))
		}
		s = s.Types(args...)
	}
	return s
}

// tparam returns the decorator's name for a type parameter.
func (r *typeNames) tparam(t *types.TypeParam) string {
	if i := t.Index(); i >= 0 && i < len(r.tparams) {
		return r.tparams[i]
	}
	return t.Obj().Name()
}

func (r *typeNames) chanType(t *types.Chan) *jen.Statement {
	elem := r.typ(t.Elem())
	switch t.Dir() {
	case types.SendOnly:
		return jen.Chan().Op("<-").Add(elem)
	case types.RecvOnly:
		return jen.Op("<-").Chan().Add(elem)
	}
	// chan (<-chan T) needs the parentheses: chan <-chan T means chan<- (chan T).
	if inner, ok := t.Elem().(*types.Chan); ok && inner.Dir() == types.RecvOnly {
		elem = jen.Parens(elem)
	}
	return jen.Chan().Add(elem)
}

// signature returns the parameters and results of sig, with their names
// when withNames is set and the tuple is named.
func (r *typeNames) signature(sig *types.Signature, withNames bool) *jen.Statement {
	params := r.tuple(sig.Params(), sig.Variadic(), withNames)
	s := jen.Params(params...)
	res := sig.Results()
	switch {
	case res.Len() == 1 && (!withNames || res.At(0).Name() == ""):
		s.Add(r.typ(res.At(0).Type()))
	case res.Len() > 0:
		s.Params(r.tuple(res, false, withNames)...)
	}
	return s
}

func (r *typeNames) tuple(t *types.Tuple, variadic, withNames bool) []jen.Code {
	named := withNames && t.Len() > 0 && t.At(0).Name() != ""
	out := make([]jen.Code, t.Len())
	for i := range out {
		v := t.At(i)
		var typ *jen.Statement
		if variadic && i == t.Len()-1 {
			typ = jen.Op("...").Add(r.typ(v.Type().(*types.Slice).Elem()))
		} else {
			typ = r.typ(v.Type())
		}
		if named {
			typ = jen.Id(v.Name()).Add(typ)
		}
		out[i] = typ
	}
	return out
}

func (r *typeNames) structType(t *types.Struct) *jen.Statement {
	fields := make([]jen.Code, t.NumFields())
	for i := range fields {
		f := t.Field(i)
		var s *jen.Statement
		if f.Embedded() {
			s = r.typ(f.Type())
		} else {
			s = jen.Id(f.Name()).Add(r.typ(f.Type()))
		}
		if tag := t.Tag(i); tag != "" {
			s = s.Add(rawString(tag))
		}
		fields[i] = s
	}
	return oneLine("struct", fields)
}

// oneLine writes a struct or interface type literal on one line, as it is
// usually written inside a signature: struct{ A int; B string }.
func oneLine(keyword string, elems []jen.Code) *jen.Statement {
	return jen.Custom(jen.Options{Open: keyword + "{", Close: "}", Separator: ";"}, elems...)
}

// rawString renders s as a raw string literal when it can be one.
func rawString(s string) jen.Code {
	if strings.ContainsAny(s, "`\r") {
		return jen.Lit(s)
	}
	return jen.Op("`" + s + "`")
}

func (r *typeNames) interfaceType(t *types.Interface) *jen.Statement {
	if t.IsImplicit() && t.NumEmbeddeds() == 1 {
		return r.typ(t.EmbeddedType(0)) // [T ~int | string]
	}
	var elems []jen.Code
	for i := 0; i < t.NumEmbeddeds(); i++ {
		elems = append(elems, r.typ(t.EmbeddedType(i)))
	}
	for i := 0; i < t.NumExplicitMethods(); i++ {
		m := t.ExplicitMethod(i)
		elems = append(elems, jen.Id(m.Name()).Add(r.signature(m.Type().(*types.Signature), true)))
	}
	return oneLine("interface", elems)
}

func (r *typeNames) union(t *types.Union) *jen.Statement {
	terms := make([]jen.Code, t.Len())
	for i := range terms {
		term := t.Term(i)
		if term.Tilde() {
			terms[i] = jen.Op("~").Add(r.typ(term.Type()))
		} else {
			terms[i] = r.typ(term.Type())
		}
	}
	return jen.Union(terms...)
}

// visitTypeNames calls f with the type name of every named type, alias,
// type parameter and basic type that writing t mentions.
func visitTypeNames(t types.Type, f func(*types.TypeName)) {
	switch t := t.(type) {
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			f(types.Unsafe.Scope().Lookup("Pointer").(*types.TypeName))
		} else if obj, ok := types.Universe.Lookup(t.Name()).(*types.TypeName); ok {
			f(obj)
		}
	case *types.Alias:
		f(t.Obj())
		visitTypeList(t.TypeArgs(), f)
	case *types.Named:
		f(t.Obj())
		visitTypeList(t.TypeArgs(), f)
	case *types.TypeParam:
		f(t.Obj())
	case interface{ Elem() types.Type }: // pointer, slice, array, chan, and map's element
		if m, ok := t.(*types.Map); ok {
			visitTypeNames(m.Key(), f)
		}
		visitTypeNames(t.Elem(), f)
	case *types.Signature:
		visitTuple(t.Params(), f)
		visitTuple(t.Results(), f)
	case *types.Struct:
		for i := 0; i < t.NumFields(); i++ {
			visitTypeNames(t.Field(i).Type(), f)
		}
	case *types.Interface:
		for i := 0; i < t.NumEmbeddeds(); i++ {
			visitTypeNames(t.EmbeddedType(i), f)
		}
		for i := 0; i < t.NumExplicitMethods(); i++ {
			visitTypeNames(t.ExplicitMethod(i).Type(), f)
		}
	case *types.Union:
		for i := 0; i < t.Len(); i++ {
			visitTypeNames(t.Term(i).Type(), f)
		}
	}
}

func visitTypeList(l *types.TypeList, f func(*types.TypeName)) {
	for i := 0; i < l.Len(); i++ {
		visitTypeNames(l.At(i), f)
	}
}

func visitTuple(t *types.Tuple, f func(*types.TypeName)) {
	for i := 0; i < t.Len(); i++ {
		visitTypeNames(t.At(i).Type(), f)
	}
}

// idents returns the identifiers that writing t in the generated file
// refers to: import names, local type names, type parameters and
// predeclared types. A variable with one of these names would shadow them.
func (r *typeNames) idents(t types.Type) []string {
	var out []string
	visitTypeNames(t, func(obj *types.TypeName) {
		switch {
		case isTypeParam(obj):
			out = append(out, r.tparam(obj.Type().(*types.TypeParam)))
		case obj.Pkg() == nil || obj.Pkg().Path() == r.pkgPath:
			out = append(out, obj.Name())
		default:
			out = append(out, r.imports[obj.Pkg().Path()])
		}
	})
	return out
}

func isTypeParam(obj *types.TypeName) bool {
	_, ok := obj.Type().(*types.TypeParam)
	return ok
}
