package templates

import (
	"go/types"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/dave/jennifer/jen"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// methodGen writes one decorator method. Every identifier the method
// declares (parameters, err, zero values, temporaries) comes from locals,
// which starts out holding every identifier the body refers to, so no
// declaration shadows something the body needs.
type methodGen struct {
	r      *renderer
	p      *decoratorPlan
	m      *methodPlan
	locals *names
	params []string // parameter names
	err    string   // the error variable of a limited method
	zeros  []zero   // zero values of every result but the last error
	// checked holds the paths of fields from parameters already checked
	// for nil in the method's code, so that its keys and its cost check
	// each path once.
	checked map[string]bool
	// settling is set while the statements that compute settle= are
	// written: a value starts from a result (resultVars), and a value that
	// cannot be computed returns the call's results (see settleBody).
	settling   bool
	resultVars []string // result variables of a method with settle=
}

// zero is the zero value of one result: a literal, or a variable.
type zero struct {
	lit     func() *jen.Statement // nil when a variable is needed
	typ     types.Type
	varName string
}

// method appends one decorator method with its doc comment.
func (r *renderer) method(g *jen.Group, p *decoratorPlan, m *methodPlan) {
	mg := r.newMethodGen(p, m)
	doc(g, mg.doc())
	g.Func().Params(jen.Id(p.recv).Op("*").Add(p.selfType())).Id(m.Name).
		Params(mg.paramDecls()...).Add(mg.results()).
		Block(mg.body()...)
}

func (r *renderer) newMethodGen(p *decoratorPlan, m *methodPlan) *methodGen {
	// Names the generator invents also avoid the file's package-level
	// names, so that a renamed parameter never reads like an import.
	mg := &methodGen{r: r, p: p, m: m, locals: newNames(func(s string) bool { return r.pkg.taken[s] })}
	mg.locals.reserve(p.recv)
	mg.locals.reserve(p.tparams...)
	if m.rule != "" {
		mg.planZeros()
		mg.locals.reserve(mg.bodyIdents()...)
	}
	mg.planParams()
	if m.rule != "" {
		mg.err = mg.locals.fresh("err")
		for i := range mg.zeros {
			if mg.zeros[i].lit == nil {
				mg.zeros[i].varName = mg.locals.fresh("zero")
			}
		}
	}
	return mg
}

// planParams names the parameters: as declared when the name is free,
// ctx or p1, p2... for unnamed and blank ones.
func (mg *methodGen) planParams() {
	params := mg.m.Sig.Params()
	mg.params = make([]string, params.Len())
	for i := range mg.params {
		if name := params.At(i).Name(); name != "" && name != "_" && !mg.locals.taken[name] {
			mg.locals.reserve(name)
			mg.params[i] = name
		}
	}
	for i := range mg.params {
		if mg.params[i] != "" {
			continue
		}
		v := params.At(i)
		base := v.Name()
		switch {
		case base != "" && base != "_":
			// keep the declared name, numbered
		case isContext(v.Type()):
			base = "ctx"
		default:
			base = "p" + strconv.Itoa(i+1)
		}
		mg.params[i] = mg.locals.fresh(base)
	}
}

// isContext reports whether t is context.Context.
func isContext(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context" && n.Obj().Name() == "Context"
}

// planZeros works out the zero value of every result but the last.
func (mg *methodGen) planZeros() {
	res := mg.m.Sig.Results()
	for i := 0; i < res.Len()-1; i++ {
		t := res.At(i).Type()
		mg.zeros = append(mg.zeros, zero{lit: mg.r.zeroLiteral(t), typ: t})
	}
}

// zeroLiteral returns the zero value of t as a literal (nil, 0, "", false,
// T{}), or nil when it has none and needs a variable.
func (r *renderer) zeroLiteral(t types.Type) func() *jen.Statement {
	if _, ok := types.Unalias(t).(*types.TypeParam); ok {
		return nil
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsBoolean != 0:
			return jen.False
		case u.Info()&types.IsString != 0:
			return func() *jen.Statement { return jen.Lit("") }
		case u.Info()&types.IsNumeric != 0:
			return func() *jen.Statement { return jen.Lit(0) }
		case u.Kind() == types.UnsafePointer:
			return jen.Nil
		}
	case *types.Pointer, *types.Slice, *types.Map, *types.Chan, *types.Signature, *types.Interface:
		return jen.Nil
	case *types.Struct, *types.Array:
		switch t.(type) {
		case *types.Named, *types.Alias:
			return func() *jen.Statement { return r.types.typ(t).Values() }
		}
	}
	return nil
}

// bodyIdents returns the identifiers a limited method's body refers to
// outside itself.
func (mg *methodGen) bodyIdents() []string {
	rule, imports := mg.m.Rule, mg.r.types.imports
	ids := []string{mg.m.rule, "nil"}
	if rule.Context < 0 {
		ids = append(ids, imports["context"])
	}
	if rule.CostConvert {
		ids = append(ids, "int64")
	}
	if v := rule.CostValue; v != nil {
		ids = append(ids, mg.r.valueIdents(v)...)
	}
	if v := rule.Settle; v != nil {
		ids = append(ids, mg.r.valueIdents(v)...)
		if rule.SettleConvert {
			ids = append(ids, "int64")
		}
	}
	if v := rule.RefundValue; v != nil {
		ids = append(ids, mg.r.valueIdents(v)...)
	}
	if rule.Reserves() {
		ids = append(ids, imports[RuntimePath])
	}
	for _, k := range rule.Keys() {
		ids = append(ids, mg.r.keyIdents(k)...)
		if k.DenyEmpty || k.Hash {
			ids = append(ids, imports[RuntimePath])
		}
	}
	for _, z := range mg.zeros {
		if z.lit == nil || !isLiteralZero(z.typ) {
			ids = append(ids, mg.r.types.idents(z.typ)...)
		}
		if b, ok := z.typ.Underlying().(*types.Basic); ok && b.Info()&types.IsBoolean != 0 {
			ids = append(ids, "false")
		}
	}
	return ids
}

// isLiteralZero reports whether t's zero value is written without naming t.
func isLiteralZero(t types.Type) bool {
	switch t.Underlying().(type) {
	case *types.Struct, *types.Array:
		return false
	}
	_, tp := types.Unalias(t).(*types.TypeParam)
	return !tp
}

func (r *renderer) keyIdents(k *model.Key) []string {
	imports := r.types.imports
	ids := r.valueIdents(&k.Value)
	switch k.Format {
	case model.KeyStringConv:
		ids = append(ids, "string")
	case model.KeyInt64, model.KeyUint64:
		ids = append(ids, imports["strconv"])
	case model.KeyInt:
		ids = append(ids, imports["strconv"], "int64")
	case model.KeyUint:
		ids = append(ids, imports["strconv"], "uint64")
	}
	return ids
}

// valueIdents returns the identifiers the computation of v refers to: the
// runtime for its errors, and the function it calls or its package.
func (r *renderer) valueIdents(v *model.Value) []string {
	var ids []string
	for _, s := range v.Steps {
		if s.CheckNil {
			ids = append(ids, r.types.imports[RuntimePath])
		}
	}
	if v.Len != nil {
		ids = append(ids, "len")
		ids = append(ids, r.valueIdents(v.Len)...)
	}
	if f := v.Func; f != nil {
		if f.Obj.Pkg().Path() == r.f.PkgPath {
			ids = append(ids, f.Obj.Name())
		} else {
			ids = append(ids, r.types.imports[f.Obj.Pkg().Path()])
		}
		if f.Error {
			ids = append(ids, r.types.imports[RuntimePath])
		}
		for i := range f.Args {
			ids = append(ids, r.valueIdents(&f.Args[i])...)
		}
	}
	return ids
}

func (mg *methodGen) paramDecls() []jen.Code {
	params := mg.m.Sig.Params()
	out := make([]jen.Code, params.Len())
	for i := range out {
		t := params.At(i).Type()
		if mg.m.Sig.Variadic() && i == params.Len()-1 {
			out[i] = jen.Id(mg.params[i]).Op("...").Add(mg.r.types.typ(t.(*types.Slice).Elem()))
		} else {
			out[i] = jen.Id(mg.params[i]).Add(mg.r.types.typ(t))
		}
	}
	return out
}

// results returns the result types, unnamed.
func (mg *methodGen) results() jen.Code {
	res := mg.m.Sig.Results()
	switch res.Len() {
	case 0:
		return jen.Null()
	case 1:
		return mg.r.types.typ(res.At(0).Type())
	}
	out := make([]jen.Code, res.Len())
	for i := range out {
		out[i] = mg.r.types.typ(res.At(i).Type())
	}
	return jen.Params(out...)
}

// args returns the arguments that pass the parameters on, spreading a
// variadic one.
func (mg *methodGen) args() []jen.Code {
	out := make([]jen.Code, len(mg.params))
	for i, name := range mg.params {
		out[i] = jen.Id(name)
		if mg.m.Sig.Variadic() && i == len(mg.params)-1 {
			out[i] = jen.Id(name).Op("...")
		}
	}
	return out
}

// delegate calls the wrapped method and returns what it returns.
func (mg *methodGen) delegate() jen.Code {
	call := jen.Id(mg.p.recv).Dot(mg.p.next).Dot(mg.m.Name).Call(mg.args()...)
	if mg.m.Sig.Results().Len() == 0 {
		return call
	}
	return jen.Return(call)
}

func (mg *methodGen) body() []jen.Code {
	if mg.m.rule == "" {
		return []jen.Code{mg.delegate()}
	}
	mg.checked = map[string]bool{} // the key's and the cost's checks, in that order
	checks, keys := mg.keys()
	costChecks, cost := mg.cost()
	checks = append(checks, costChecks...)
	var stmts, decls []jen.Code
	for _, z := range mg.zeros {
		if z.varName != "" {
			decls = append(decls, jen.Var().Id(z.varName).Add(mg.r.types.typ(z.typ)))
		}
	}
	if len(checks) > 0 {
		// Several branches return the zero values: declare them once.
		stmts, decls = append(stmts, decls...), nil
	}
	stmts = append(stmts, checks...)
	err := jen.Id(mg.err)
	if mg.m.Rule.Reserves() {
		return append(stmts, mg.reserveBody(keys, cost, decls)...)
	}
	check := jen.Id(mg.m.rule).Dot("Check").Call(append([]jen.Code{mg.ctx(), jen.Id(mg.p.recv).Dot(mg.p.limiter), cost}, keys...)...)
	stmts = append(stmts,
		jen.If(jen.Id(mg.err).Op(":=").Add(check), jen.Id(mg.err).Op("!=").Nil()).
			Block(append(decls, jen.Return(mg.zeroResults(err)...))...))
	if mg.m.Rule.Cools() {
		return append(stmts, mg.coolBody(keys)...)
	}
	return append(stmts, mg.delegate())
}

// coolBody returns the statements of a method with a cooldown line that
// checks (does not reserve), after its call was admitted: call the
// wrapped method and, when it returns an error, tell the runtime
// (ratelimit.Rule.CooldownOn), which cools the lines marked cooldown=true
// when the error carries a retry time.
func (mg *methodGen) coolBody(keys []jen.Code) []jen.Code {
	mg.planResults()
	call := jen.Id(mg.p.recv).Dot(mg.p.next).Dot(mg.m.Name).Call(mg.args()...)
	return []jen.Code{
		jen.List(mg.resultIDs(jen.Id(mg.err))...).Op(":=").Add(call),
		jen.If(jen.Id(mg.err).Op("!=").Nil()).Block(mg.cool(keys)),
		jen.Return(mg.resultIDs(jen.Id(mg.err))...),
	}
}

// cool returns the statement that tells the runtime the error of a call
// of a method with a cooldown line, whose keys (as the limiter was given
// them) are keys.
func (mg *methodGen) cool(keys []jen.Code) jen.Code {
	args := append([]jen.Code{mg.ctx(), jen.Id(mg.p.recv).Dot(mg.p.limiter), jen.Id(mg.err)}, keys...)
	return jen.Id("_").Op("=").Id(mg.m.rule).Dot("CooldownOn").Call(args...)
}

// zeroResults returns the zero values followed by errExpr.
func (mg *methodGen) zeroResults(errExpr jen.Code) []jen.Code {
	out := make([]jen.Code, 0, len(mg.zeros)+1)
	for _, z := range mg.zeros {
		if z.lit != nil {
			out = append(out, z.lit())
		} else {
			out = append(out, jen.Id(z.varName))
		}
	}
	return append(out, errExpr)
}

func (mg *methodGen) ctx() jen.Code {
	rule := mg.m.Rule
	switch {
	case rule.Context >= 0 && rule.ContextMethod:
		return jen.Id(mg.params[rule.Context]).Dot("Context").Call()
	case rule.Context >= 0:
		return jen.Id(mg.params[rule.Context])
	}
	return jen.Qual("context", "Background").Call()
}

// cost returns the statements that compute the cost and its expression.
func (mg *methodGen) cost() (stmts []jen.Code, cost jen.Code) {
	rule := mg.m.Rule
	switch {
	case rule.CostValue != nil:
		stmts, v := mg.value(rule.CostValue)
		if rule.CostConvert {
			return stmts, jen.Int64().Call(v())
		}
		return stmts, v()
	case rule.Cost != 0:
		return nil, jen.Lit(int(rule.Cost))
	}
	return nil, jen.Lit(1)
}

// keys returns the statements that compute the keys, and the keys that
// Check takes after the cost: none when no line has key=, the key every
// line shares, or one key per line ("" for a line without key=). Each
// distinct key is computed once.
func (mg *methodGen) keys() (stmts []jen.Code, keys []jen.Code) {
	rule := mg.m.Rule
	if k, ok := rule.SharedKey(); ok {
		if k == nil {
			return nil, nil
		}
		stmts, key := mg.key(k, "key", false)
		return stmts, []jen.Code{key}
	}
	uses := map[*model.Key]int{}
	for _, l := range rule.Limits {
		if l.Key != nil {
			uses[l.Key]++
		}
	}
	exprs := map[*model.Key]jen.Code{}
	for _, k := range rule.Keys() {
		keyStmts, key := mg.key(k, keyVarBase(k.Source), uses[k] > 1)
		stmts = append(stmts, keyStmts...)
		exprs[k] = key
	}
	keys = make([]jen.Code, len(rule.Limits))
	for i, l := range rule.Limits {
		keys[i] = jen.Lit("")
		if l.Key != nil {
			keys[i] = exprs[l.Key]
		}
	}
	return stmts, keys
}

// key returns the statements that compute k and its expression: a
// variable when it is computed, so the check reads plainly, named base.
// A key that several limits share (shared) is a variable in any case, so
// it is computed once.
func (mg *methodGen) key(k *model.Key, base string, shared bool) (stmts []jen.Code, key jen.Code) {
	stmts, v := mg.value(&k.Value)
	key = formatKey(k.Format, v())
	// A string parameter, or the result of a call that can fail, is a
	// variable already; anything else computed is named, so the check
	// reads plainly.
	variable := k.Format == model.KeyString && len(k.Steps) == 0 && (k.Func == nil || k.Func.Error)
	if !variable && (len(k.Steps) > 0 || k.Format != model.KeyString || k.DenyEmpty || shared && !k.Hash) {
		name := mg.locals.fresh(base)
		stmts = append(stmts, jen.Id(name).Op(":=").Add(key))
		key = jen.Id(name)
	}
	if k.DenyEmpty {
		empty := keyError(mg.m.rule, "KeyError", k.Source, jen.Qual(RuntimePath, "ErrEmptyKey"))
		stmts = append(stmts, jen.If(jen.Add(key).Op("==").Lit("")).Block(jen.Return(mg.zeroResults(empty)...)))
	}
	if k.Hash {
		key = jen.Qual(RuntimePath, "KeyDigest").Call(key)
		if shared {
			name := mg.locals.fresh(strings.TrimSuffix(base, "Key") + "Digest")
			stmts = append(stmts, jen.Id(name).Op(":=").Add(key))
			key = jen.Id(name)
		}
	}
	return stmts, key
}

// keyVarBase names the variable of a key of a rule with several keys
// after what its expression selects or calls last, without a getter's
// Get: item.Owner → ownerKey, req.GetTenant() → tenantKey,
// auth.Principal(ctx) → principalKey.
func keyVarBase(source string) string {
	s := source
	if strings.HasSuffix(s, ")") {
		depth := 0
		for i := len(s) - 1; i >= 0; i-- {
			switch s[i] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				s = s[:i]
				break
			}
		}
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		s = s[i+1:]
	}
	if rest, ok := strings.CutPrefix(s, "Get"); ok && rest != "" && unicode.IsUpper(rune(rest[0])) {
		s = rest
	}
	if s == "" {
		return "key"
	}
	return model.LowerCamel(s) + "Key"
}

// value returns the statements that compute v (nil checks, and a call
// with its error check) and its expression. A value produced by a call is
// bound to a variable before it is checked, so nothing is called twice.
func (mg *methodGen) value(v *model.Value) (stmts []jen.Code, expr func() *jen.Statement) {
	lastCall := ""
	if f := v.Func; f != nil {
		args := make([]jen.Code, len(f.Args))
		for i := range f.Args {
			argStmts, arg := mg.value(&f.Args[i])
			stmts = append(stmts, argStmts...)
			args[i] = arg()
		}
		call := jen.Qual(f.Obj.Pkg().Path(), f.Obj.Name()).Call(args...)
		if f.Error {
			res := mg.locals.fresh(model.LowerCamel(f.Obj.Name()))
			callErr := keyError(mg.m.rule, "FuncError", v.Source, jen.Id(mg.err))
			stmts = append(stmts,
				jen.List(jen.Id(res), jen.Id(mg.err)).Op(":=").Add(call),
				jen.If(jen.Id(mg.err).Op("!=").Nil()).Block(mg.fail(callErr)))
			expr = func() *jen.Statement { return jen.Id(res) }
		} else {
			expr, lastCall = func() *jen.Statement { return call.Clone() }, f.Obj.Name()
		}
	} else if v.Len != nil {
		lenStmts, x := mg.value(v.Len)
		stmts = append(stmts, lenStmts...)
		expr = func() *jen.Statement { return jen.Len(x()) }
	} else {
		operands := mg.params
		if mg.settling {
			operands = mg.resultVars
		}
		param := operands[v.Param]
		expr = func() *jen.Statement { return jen.Id(param) }
	}
	for _, s := range v.Steps {
		if s.CheckNil && !mg.checkedBefore(s.Path) {
			if lastCall != "" {
				name := mg.locals.fresh(model.LowerCamel(lastCall))
				stmts = append(stmts, jen.Id(name).Op(":=").Add(expr()))
				expr, lastCall = func() *jen.Statement { return jen.Id(name) }, ""
			}
			nilErr := keyError(mg.m.rule, "KeyError", s.Path, jen.Qual(RuntimePath, "ErrNilKey"))
			stmts = append(stmts, jen.If(expr().Op("==").Nil()).Block(mg.fail(nilErr)))
		}
		prev, name := expr, s.Name
		switch {
		case s.Deref:
			expr = func() *jen.Statement { return jen.Op("*").Add(prev()) }
		case s.Call:
			expr, lastCall = func() *jen.Statement { return prev().Dot(name).Call() }, name
		default:
			expr = func() *jen.Statement { return prev().Dot(name) }
		}
	}
	return stmts, expr
}

// checkedBefore reports whether the method checks path for nil already,
// and notes that it does from now on. Only the fields of parameters
// count: a method's or a function's result is checked each time it is
// computed.
func (mg *methodGen) checkedBefore(path string) bool {
	if mg.checked == nil || strings.Contains(path, "(") {
		return false
	}
	done := mg.checked[path]
	mg.checked[path] = true
	return done
}

func formatKey(f model.KeyFormat, x *jen.Statement) jen.Code {
	switch f {
	case model.KeyStringConv:
		return jen.String().Call(x)
	case model.KeyInt64:
		return jen.Qual("strconv", "FormatInt").Call(x, jen.Lit(10))
	case model.KeyInt:
		return jen.Qual("strconv", "FormatInt").Call(jen.Int64().Call(x), jen.Lit(10))
	case model.KeyUint64:
		return jen.Qual("strconv", "FormatUint").Call(x, jen.Lit(10))
	case model.KeyUint:
		return jen.Qual("strconv", "FormatUint").Call(jen.Uint64().Call(x), jen.Lit(10))
	}
	return x
}

// doc describes the method.
func (mg *methodGen) doc() string {
	name, typeName := mg.m.Name, mg.p.Type.Obj().Name()
	target := "the wrapped " + typeName + "'s " + name
	switch {
	case !mg.p.Interface():
		target = "(*" + typeName + ")." + name
	case mg.p.Embed:
		target = "the embedded " + typeName + "'s " + name
	}
	if mg.m.rule == "" {
		return name + " calls " + target + "; it is not limited."
	}
	s := name + " calls " + target + " if the limiter admits the call under " + mg.m.rule +
		"; otherwise it returns the limiter's error."
	if paths := unique(mg.nilPaths()); len(paths) > 0 {
		s += " If " + orList(paths) + " is nil, it returns an error wrapping " +
			"ratelimit.ErrNilKey instead."
	}
	if calls := mg.failingCalls(); len(calls) > 0 {
		s += " If " + orList(calls) + " fails, it returns that error, wrapped, without calling it."
	}
	if mg.m.Rule.Context < 0 && mg.p.hasContext() {
		s += " It takes no context, so a ratelimit.WithAdmission context cannot record its admission."
	}
	var denyEmpty, hashed []string
	for _, k := range mg.m.Rule.Keys() {
		if k.DenyEmpty {
			denyEmpty = append(denyEmpty, k.Source)
		}
		if k.Hash {
			hashed = append(hashed, k.Source)
		}
	}
	if len(denyEmpty) > 0 {
		s += " If the key " + orList(denyEmpty) + " is empty, it returns an error wrapping " +
			"ratelimit.ErrEmptyKey instead."
	}
	if _, shared := mg.m.Rule.SharedKey(); shared && len(hashed) > 0 {
		s += " The limiter sees the digest of the key (ratelimit.KeyDigest), never the key."
	} else if len(hashed) > 0 {
		s += " The limiter sees the digest of the key " + andList(hashed) + " (ratelimit.KeyDigest), never the key."
	}
	if concurrent(mg.m.Rule) {
		s += " The call holds a slot of its concurrency limit until it returns, panics included."
	}
	rule := mg.m.Rule
	if v := rule.Settle; v != nil {
		s += " It reserves the cost before the call, and settles at " + v.Source +
			" once the call returns no error; a call that fails"
		if canFail(v) {
			s += ", or whose " + v.Source + " cannot be read,"
		}
		s += " stays charged as reserved."
	}
	if n := rule.SettleUnits; n != nil {
		s += " It reserves the cost before the call, and settles at " + strconv.FormatInt(*n, 10) +
			" once the call returns no error; a call that fails stays charged as reserved."
	}
	switch {
	case rule.Refund == "error":
		s += " A call that returns an error is given back all it took (ratelimit.Reservation.Refund)."
	case rule.Refund == "success":
		s += " Only failures count: a call is admitted while the failures so far leave room, charging nothing, and is charged when it returns an error (ratelimit.Rule.OnlyFailures)."
	case rule.RefundValue != nil:
		s += " A call whose error makes " + rule.RefundValue.Source + " true is given back all it took (ratelimit.Reservation.Refund)."
	}
	if rule.Reserves() {
		s += " A call that a limit further in denies (an error wrapping ratelimit.ErrLimited) is given back all it took."
	}
	if rule.Cools() {
		s += " An error that carries a retry time (one with a RetryAfter() time.Duration method), such as an upstream's 429, cools the lines marked cooldown=true (ratelimit.Rule.CooldownOn): their key's calls are denied until then, in every process."
	}
	return s
}

// nilPaths returns the values of the key and cost that are checked for nil.
func (mg *methodGen) nilPaths() []string {
	var out []string
	mg.visitValues(func(v *model.Value) {
		for _, s := range v.Steps {
			if s.CheckNil {
				out = append(out, s.Path)
			}
		}
	})
	return out
}

// failingCalls returns the calls of the key and cost that can fail.
func (mg *methodGen) failingCalls() []string {
	var out []string
	mg.visitValues(func(v *model.Value) {
		if v.Func != nil && v.Func.Error {
			out = append(out, v.Source)
		}
	})
	return out
}

// visitValues calls f for the key's and the cost's values and the
// arguments of the functions they call.
func (mg *methodGen) visitValues(f func(*model.Value)) {
	var visit func(v *model.Value)
	visit = func(v *model.Value) {
		if v.Len != nil {
			visit(v.Len)
		}
		if fn := v.Func; fn != nil {
			for i := range fn.Args {
				visit(&fn.Args[i])
			}
		}
		f(v)
	}
	for _, k := range mg.m.Rule.Keys() {
		visit(&k.Value)
	}
	if v := mg.m.Rule.CostValue; v != nil {
		visit(v)
	}
}

// unique returns items without the repeats of an item, in order.
func unique(items []string) []string {
	var out []string
	for _, it := range items {
		if !slices.Contains(out, it) {
			out = append(out, it)
		}
	}
	return out
}

// fail returns the statement that ends a call whose key or cost cannot be
// computed, because of errExpr: it returns the zero values and errExpr;
// while settling, the call's results (the reservation stands).
func (mg *methodGen) fail(errExpr jen.Code) jen.Code {
	if mg.settling {
		return jen.Return(mg.resultIDs(jen.Nil())...)
	}
	return jen.Return(mg.zeroResults(errExpr)...)
}

// orList joins items as prose: "a", "a or b", "a, b or c".
func orList(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// keyError is the error a decorator returns when a key or cost expression
// of rule fails: &ratelimit.<typ>{Name: rule.Name, Expr: expr, Err: err}.
func keyError(rule, typ, expr string, err jen.Code) *jen.Statement {
	return jen.Op("&").Qual(RuntimePath, typ).Values(
		jen.Id("Name").Op(":").Id(rule).Dot("Name"),
		jen.Id("Expr").Op(":").Lit(expr),
		jen.Id("Err").Op(":").Add(err),
	)
}
