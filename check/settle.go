package check

import (
	"go/types"

	"github.com/ratelimitgen/ratelimitgen/model"
)

// settle sets r's Settle from settle=, whose identifiers name the method's
// results: the method must have a result besides its error, and the value
// must be an integer.
func (rc *ruleChecker) settle(r *model.Rule, o option) {
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
