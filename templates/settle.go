package templates

import (
	"strconv"

	"github.com/dave/jennifer/jen"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/model"
)

// reserveBody returns the statements of a method with settle= or a
// concurrency line after its key and cost are computed: reserve the cost
// (and a slot, given back by a deferred Release, panics included), call
// the wrapped method, and with settle=, when it returns no error, settle
// at the value settle= reads from its results. A call that returns an
// error, or whose settle value cannot be computed (a nil pointer on the
// way, a function that fails), returns its results as they are: the
// reservation stands. A failed settle is the limiter's hook's to report
// (it charged as reserved); the call's results are returned all the same.
func (mg *methodGen) reserveBody(keys []jen.Code, cost jen.Code, decls []jen.Code) []jen.Code {
	res := mg.locals.fresh("reservation")
	reserve := jen.Id(mg.m.rule).Dot("Reserve").Call(append([]jen.Code{mg.ctx(), jen.Id(mg.p.recv).Dot(mg.p.limiter), cost}, keys...)...)
	stmts := []jen.Code{
		jen.List(jen.Id(res), jen.Id(mg.err)).Op(":=").Add(reserve),
		jen.If(jen.Id(mg.err).Op("!=").Nil()).Block(append(decls, jen.Return(mg.zeroResults(jen.Id(mg.err))...))...),
	}
	if concurrent(mg.m.Rule) {
		stmts = append(stmts, jen.Defer().Id(res).Dot("Release").Call(mg.ctx()))
	}
	if mg.m.Rule.Settle == nil {
		return append(stmts, mg.delegate())
	}
	mg.planResults()
	call := jen.Id(mg.p.recv).Dot(mg.p.next).Dot(mg.m.Name).Call(mg.args()...)
	stmts = append(stmts,
		jen.List(mg.resultIDs(jen.Id(mg.err))...).Op(":=").Add(call),
		jen.If(jen.Id(mg.err).Op("!=").Nil()).Block(jen.Return(mg.resultIDs(jen.Id(mg.err))...)))
	mg.settling = true
	valueStmts, v := mg.value(mg.m.Rule.Settle)
	mg.settling = false
	stmts = append(stmts, valueStmts...)
	actual := v()
	if mg.m.Rule.SettleConvert {
		actual = jen.Int64().Call(actual)
	}
	return append(stmts,
		jen.Id("_").Op("=").Id(res).Dot("Settle").Call(mg.ctx(), actual),
		jen.Return(mg.resultIDs(jen.Nil())...))
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
