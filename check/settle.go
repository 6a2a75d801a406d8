package check

import (
	"go/types"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// settle sets r's Settle from settle=, whose identifiers name the method's
// results: the method must have a result besides its error, and the value
// must be an integer.
func (rc *ruleChecker) settle(r *model.Rule, o option) {
	if n := o.d.SettleUnits; n != nil {
		r.SettleUnits = n // a number: no result to read
		return
	}
	if rc.sig.Results().Len() < 2 {
		rc.errorf(o.arg.NamePos, "settle=%s: %s returns only an error: no result to read the final cost from", o.arg.Value, rc.where)
		return
	}
	first := o.d.Settle.Parts[0]
	rc.results = true
	defer func() { rc.results = false }()
	if !first.Call && rc.param(first.Name) < 0 && rc.sig.Params().Len() > 0 {
		for i := 0; i < rc.sig.Params().Len(); i++ {
			if rc.sig.Params().At(i).Name() == first.Name {
				rc.errorf(rc.posAt(o.arg, first.Offset), "settle=%s: %s is a parameter; settle= reads the results of %s (%s)", o.arg.Value, first.Name, rc.where, rc.paramNames())
				return
			}
		}
	}
	if w := rc.value(o.arg, o.d.Settle); w != nil {
		r.Settle, r.SettleConvert = w.cost()
	}
}

// scope returns the parameters an expression's identifiers name, or the
// results while results is set.
func (rc *ruleChecker) scope() *types.Tuple {
	if rc.results {
		return rc.sig.Results()
	}
	return rc.sig.Params()
}

// noun names what an expression's identifiers name, for messages.
func (rc *ruleChecker) noun() string {
	if rc.results {
		return "result"
	}
	return "parameter"
}

// refund sets r's Refund, or its RefundValue from refund=<call>, whose
// identifiers name the method's results, err its error whatever its
// name: it must be a bool that cannot fail to be computed.
func (rc *ruleChecker) refund(r *model.Rule, o option) {
	if o.d.RefundExpr == nil {
		r.Refund = o.d.Refund
		return
	}
	rc.results, rc.errAlias = true, true
	defer func() { rc.results, rc.errAlias = false, false }()
	w := rc.value(o.arg, o.d.RefundExpr)
	if w == nil {
		return
	}
	if b, ok := w.t.Underlying().(*types.Basic); !ok || b.Kind() != types.Bool && b.Kind() != types.UntypedBool {
		rc.errorf(o.arg.ValuePos, "refund=%s: %s has type %s; want bool", o.arg.Value, w.spelled, rc.c.typeString(w.t))
		return
	}
	if failable(w.v) {
		rc.errorf(o.arg.ValuePos, "refund=%s: it can fail (it returns an error, or a nil pointer is on its way); a refund= must always answer", o.arg.Value)
		return
	}
	r.RefundValue = w.v
}

// failable reports whether computing v can fail: a function that
// returns an error, or a nil pointer on its way.
func failable(v *model.Value) bool {
	if v.Func != nil {
		if v.Func.Error {
			return true
		}
		for i := range v.Func.Args {
			if failable(&v.Func.Args[i]) {
				return true
			}
		}
	}
	if v.Len != nil && failable(v.Len) {
		return true
	}
	for _, s := range v.Steps {
		if s.CheckNil {
			return true
		}
	}
	return false
}
