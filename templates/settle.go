package templates

import (
	"strconv"

	"github.com/dave/jennifer/jen"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/model"
)

// reserveBody returns the statements of a method that reserves (settle=,
// refund= or a concurrency line) after its key and cost are computed:
// reserve the cost (and a slot, given back by a deferred Release, panics
// included), call the wrapped method, and then: when it returns an error,
// give the reservation back (Refund) if a limit further in denied the
// call (errors.Is(err, ratelimit.ErrLimited)), or refund= says so, else
// let it stand (with refund=success, whose rule charged nothing, charge
// it: Settle at its units); when it returns none, give it back with
// refund=success, else settle at the
// value settle= reads from its results (or its number). A call whose
// settle value cannot be computed (a nil pointer on the way, a function
// that fails) returns its results as they are: the reservation stands. A
// failed settle or refund is the limiter's hook's to report (it charged as
// reserved); the call's results are returned all the same.
func (mg *methodGen) reserveBody(keys []jen.Code, cost jen.Code, decls []jen.Code) []jen.Code {
	rule := mg.m.Rule
	res := mg.locals.fresh("reservation")
	reserve := jen.Id(mg.m.rule).Dot("Reserve").Call(append([]jen.Code{mg.ctx(), jen.Id(mg.p.recv).Dot(mg.p.limiter), cost}, keys...)...)
	stmts := []jen.Code{
		jen.List(jen.Id(res), jen.Id(mg.err)).Op(":=").Add(reserve),
		jen.If(jen.Id(mg.err).Op("!=").Nil()).Block(append(decls, jen.Return(mg.zeroResults(jen.Id(mg.err))...))...),
	}
	if concurrent(rule) {
		stmts = append(stmts, jen.Defer().Id(res).Dot("Release").Call(mg.ctx()))
	}
	mg.planResults()
	refund := jen.Id("_").Op("=").Id(res).Dot("Refund").Call(mg.ctx())
	call := jen.Id(mg.p.recv).Dot(mg.p.next).Dot(mg.m.Name).Call(mg.args()...)
	assign := ":="
	if len(mg.resultVars) == 1 {
		assign = "=" // the error alone, declared by the reservation's line
	}
	stmts = append(stmts, jen.List(mg.resultIDs(jen.Id(mg.err))...).Op(assign).Add(call))
	onError := []jen.Code{refund}
	if rule.Refund != "error" {
		denied := jen.Qual("errors", "Is").Call(jen.Id(mg.err), jen.Qual(RuntimePath, "ErrLimited"))
		var valueStmts []jen.Code
		if v := rule.RefundValue; v != nil {
			mg.settling = true
			var x func() *jen.Statement
			valueStmts, x = mg.value(v)
			mg.settling = false
			denied = denied.Op("||").Add(x())
		}
		branch := jen.If(denied).Block(refund)
		if rule.Refund == "success" {
			// Only failures count: a failure is charged now.
			branch = branch.Else().Block(jen.Id("_").Op("=").Id(res).Dot("Settle").Call(mg.ctx(), jen.Id(res).Dot("Units").Call()))
		}
		onError = append(valueStmts, branch)
	}
	if rule.Cools() {
		onError = append([]jen.Code{mg.cool(keys)}, onError...)
	}
	stmts = append(stmts, jen.If(jen.Id(mg.err).Op("!=").Nil()).Block(append(onError, jen.Return(mg.resultIDs(jen.Id(mg.err))...))...))
	switch {
	case rule.Refund == "success":
		stmts = append(stmts, refund)
	case rule.SettleUnits != nil:
		stmts = append(stmts, jen.Id("_").Op("=").Id(res).Dot("Settle").Call(mg.ctx(), jen.Lit(int(*rule.SettleUnits))))
	case rule.Settle != nil:
		mg.settling = true
		valueStmts, v := mg.value(rule.Settle)
		mg.settling = false
		stmts = append(stmts, valueStmts...)
		actual := v()
		if rule.SettleConvert {
			actual = jen.Int64().Call(actual)
		}
		stmts = append(stmts, jen.Id("_").Op("=").Id(res).Dot("Settle").Call(mg.ctx(), actual))
	}
	return append(stmts, jen.Return(mg.resultIDs(jen.Nil())...))
}

// planResults names the result variables of a method with settle=: as
// declared when the name is free, else r1, r2...; the last, the error, is
// the method's error variable.
func (mg *methodGen) planResults() {
	res := mg.m.Sig.Results()
	mg.resultVars = make([]string, res.Len())
	for i := 0; i < res.Len()-1; i++ {
		base := res.At(i).Name()
		if base == "" || base == "_" {
			base = "r" + strconv.Itoa(i+1)
		}
		mg.resultVars[i] = mg.locals.fresh(base)
	}
	mg.resultVars[res.Len()-1] = mg.err
}

// resultIDs returns the result variables, with last in place of the error.
func (mg *methodGen) resultIDs(last jen.Code) []jen.Code {
	out := make([]jen.Code, len(mg.resultVars))
	for i, name := range mg.resultVars[:len(mg.resultVars)-1] {
		out[i] = jen.Id(name)
	}
	out[len(out)-1] = last
	return out
}

// canFail reports whether computing v can fail: a nil pointer on its way,
// or a function that returns an error.
func canFail(v *model.Value) bool {
	if v.Func != nil {
		if v.Func.Error {
			return true
		}
		for i := range v.Func.Args {
			if canFail(&v.Func.Args[i]) {
				return true
			}
		}
	}
	if v.Len != nil && canFail(v.Len) {
		return true
	}
	for _, s := range v.Steps {
		if s.CheckNil {
			return true
		}
	}
	return false
}

// concurrent reports whether rule has a concurrency line.
func concurrent(rule *model.Rule) bool {
	for _, l := range rule.Limits {
		if l.Algorithm == limitfacts.Concurrency {
			return true
		}
	}
	return false
}

// concurrencyValue writes a concurrency Limit: its slots, its algorithm,
// and its lease when the directive gives one.
func concurrencyValue(l model.Limit) *jen.Statement {
	var fields []jen.Code
	if l.Period != 0 {
		fields = append(fields, jen.Id("Period").Op(":").Add(duration(l.Period)))
	}
	fields = append(fields,
		jen.Id("Threshold").Op(":").Lit(int(l.Threshold)),
		jen.Id("Algorithm").Op(":").Add(algorithm(l.Algorithm)))
	return jen.Values(fields...)
}

// concurrencySummary describes a concurrency limit in prose: "10 calls in
// flight (lease 30s)".
func concurrencySummary(l model.Limit) string {
	s := strconv.FormatInt(l.Threshold, 10) + " calls in flight"
	if l.Threshold == 1 {
		s = "1 call in flight"
	}
	if l.Period != 0 {
		s += " (lease " + proseDuration(l.Period) + ")"
	}
	return s
}
