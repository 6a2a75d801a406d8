package check

import (
	"go/token"
	"go/types"
	"strconv"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/model"
	"github.com/ratelimitgen/ratelimitgen/parser"
)

// ruleChecker compiles the directives of one method into a rule, checking
// them against the method's signature.
type ruleChecker struct {
	c     *collector
	where string // Type.Method, for messages
	sig   *types.Signature
	dirs  []*parser.Directive
	// pos is the position of the method's first directive (dirs may
	// start with a shared line of its type's).
	pos token.Position
	ok  bool
	// results makes the identifiers of an expression name the method's
	// results instead of its parameters (settle=, refund=).
	results bool
	// errAlias makes err name the method's error result when no result is
	// called err (refund=retryable(err) of a method returning error).
	errAlias bool
}

// perCallOptions may be written on any line of a method but must agree.
// The key (key=, emptykey=, keyhash=) is each line's own, and so are
// cost= and settle= (see costOptions).
var perCallOptions = []string{"name", "wait", "onerror", "shadow", "refund"}

// costOptions are the options of a line that takes the call's cost: a
// line that writes neither counts 1 per call, when another line writes
// them. A call has one cost, so the lines that write them must agree.
var costOptions = []string{"cost", "settle"}

// option is the first use of a per-call option.
type option struct {
	d   *parser.Directive
	arg parser.Arg
}

var errorType = types.Universe.Lookup("error").Type()

// rule returns the rule, or nil when a directive has errors (reported).
// A line with syntax errors (reported) still has its keys checked, so
// that every problem of the line is reported at once; no rule is built.
func (rc *ruleChecker) rule(defaultName string) *model.Rule {
	for _, d := range rc.dirs {
		if rc.c.broken[d] {
			rc.checkKeysAlone()
			return nil
		}
	}
	rc.ok = true
	rc.checkResults()
	opts := rc.options()
	costLine := rc.costLine(opts)
	r := &model.Rule{Pos: rc.at(), Name: defaultName, Context: -1}
	for _, d := range rc.dirs {
		l := limit(d)
		// A shared line takes the cost of each method's calls: it is
		// declared once for methods of different costs.
		l.PerCall = costLine != nil && !takesCost(d) && d.Concurrency == 0 && d.Shared == ""
		r.Limits = append(r.Limits, l)
	}
	rc.checkConcurrency()
	rc.checkPrefetch()
	if n := len(rc.dirs); n > limitfacts.MaxLimits {
		rc.errorf(rc.dirs[limitfacts.MaxLimits].Pos, "%s has %d limits; a method may have at most %d", rc.where, n, limitfacts.MaxLimits)
	}
	if params := rc.sig.Params(); params.Len() > 0 && isContext(params.At(0).Type()) {
		r.Context = 0
	} else {
		r.Context = rc.streamParam()
		r.ContextMethod = r.Context >= 0
	}
	rc.applyOptions(r, opts)
	rc.keys(r)
	rc.checkSharedReserved(r)
	rc.checkReservedKeys(r)
	if !rc.ok {
		return nil
	}
	return r
}

// checkPrefetch reports prefetch= on more than one line of a method: a
// call is admitted from the lease of one line, its first with a Prefetch
// (see guard.Leases), and the others would be decided exactly.
func (rc *ruleChecker) checkPrefetch() {
	first := 0
	for _, d := range rc.dirs {
		a, ok := d.Arg("prefetch")
		if !ok || d.Shared != "" { // a shared line's is reported where declared
			continue
		}
		if first == 0 {
			first = a.NamePos.Line
			continue
		}
		rc.errorf(a.NamePos, "prefetch= goes on one line of %s, and line %d has it already: a call is admitted from the lease of one line; remove one", rc.where, first)
	}
}

// at returns the position of the method's first directive.
func (rc *ruleChecker) at() token.Position {
	if rc.pos.IsValid() {
		return rc.pos
	}
	return rc.dirs[0].Pos
}

// takesShared returns the first shared line among the method's lines, or
// nil.
func (rc *ruleChecker) takesShared() *parser.Directive {
	for _, d := range rc.dirs {
		if d.Shared != "" {
			return d
		}
	}
	return nil
}

// checkSharedReserved reports a method that holds a concurrency slot and
// takes a shared line: a slot is held under one key, and a shared line is
// checked with a key per limit. (Settles and refunds take a key per line.)
func (rc *ruleChecker) checkSharedReserved(r *model.Rule) {
	shared := rc.takesShared()
	if shared == nil {
		return
	}
	for _, d := range rc.dirs {
		if d.Concurrency == 0 {
			continue
		}
		a, _ := d.Arg("concurrency")
		rc.errorf(a.NamePos, "concurrency= does not go with shared line %s on %s: a slot is held under one key, and a shared line is decided with a key per line; limit this method without the shared line", shared.Shared, rc.where).
			AddNote(shared.Pos, "shared line %s", shared.Shared)
		return
	}
}

// applyOptions sets the per-call options of r, checking cost= against
// the signature.
func (rc *ruleChecker) applyOptions(r *model.Rule, opts map[string]option) {
	if o, ok := opts["name"]; ok {
		r.Name = o.d.Name
	}
	if o, ok := opts["cost"]; ok {
		if o.d.CostExpr == nil {
			r.Cost = o.d.Cost
		} else if w := rc.value(o.arg, o.d.CostExpr); w != nil {
			r.CostValue, r.CostConvert = w.cost()
		}
	}
	if o, ok := opts["settle"]; ok {
		rc.settle(r, o)
	}
	if o, ok := opts["wait"]; ok {
		r.Wait = o.d.Wait
	}
	if o, ok := opts["onerror"]; ok {
		r.OnError = o.d.OnError
	}
	if o, ok := opts["shadow"]; ok {
		r.Shadow = o.d.Shadow
	}
	if o, ok := opts["refund"]; ok {
		rc.refund(r, o)
	}
}

func (rc *ruleChecker) errorf(pos token.Position, format string, args ...any) *parser.Error {
	rc.ok = false
	return rc.c.errorf(pos, format, args...)
}

// limit returns the limit of one directive line. The parser has checked
// that the runtime can decide it. A calendar period's algorithm, which it
// need not name, is written out: fixed_window.
func limit(d *parser.Directive) model.Limit {
	// A shared line's Shared is set by the caller, who knows the package.
	if d.Concurrency != 0 {
		return model.Limit{Pos: d.Pos, Period: d.Lease, Threshold: d.Concurrency, Algorithm: limitfacts.Concurrency}
	}
	l := model.Limit{
		Pos:    d.Pos,
		Period: d.Period, Calendar: d.Calendar, TZ: d.TZ, Threshold: d.Threshold, Algorithm: d.Algorithm,
		Burst: d.Burst, Capacity: d.Capacity, Prefetch: d.Prefetch, Cooldown: d.Cooldown,
	}
	if l.Calendar != "" && l.Algorithm == "" {
		l.Algorithm = limitfacts.CalendarAlgorithm
	}
	return l
}

// checkResults reports a method that cannot return the limiter's error.
func (rc *ruleChecker) checkResults() {
	res := rc.sig.Results()
	if res.Len() == 0 || !types.Identical(res.At(res.Len()-1).Type(), errorType) {
		rc.errorf(rc.at(), "%s cannot be limited: a limited method must return error as its last result", rc.where)
	}
}

// options returns the first use of each per-call option, reporting later
// uses that disagree with it.
func (rc *ruleChecker) options() map[string]option {
	out := map[string]option{}
	for _, d := range rc.dirs {
		for _, name := range perCallOptions {
			a, ok := d.Arg(name)
			if !ok {
				continue
			}
			first, seen := out[name]
			if !seen {
				out[name] = option{d, a}
				continue
			}
			if optionValue(first.d, name) != optionValue(d, name) {
				rc.errorf(a.NamePos, "%s=%s disagrees with %s=%s: per-call options must agree on every line of a method",
					name, a.Value, name, first.arg.Value).AddNote(first.arg.NamePos, "first %s=%s", name, first.arg.Value)
			}
		}
	}
	return out
}

// takesCost reports whether line d takes the call's cost: it writes
// cost= or settle=.
func takesCost(d *parser.Directive) bool {
	for _, name := range costOptions {
		if _, ok := d.Arg(name); ok {
			return true
		}
	}
	return false
}

// costLine returns the first line that takes the call's cost, or nil,
// adding its cost= and settle= to opts, and reports each later line
// whose cost= and settle= differ from its own: every line that takes the
// cost takes the same one. (Two lines with two costs, such as the tokens
// of a prompt and the bytes of a body, would need a cost per line in one
// request; a method takes one cost, and a second cost is a second
// method or rule.)
func (rc *ruleChecker) costLine(opts map[string]option) *parser.Directive {
	var first *parser.Directive
	for _, d := range rc.dirs {
		if !takesCost(d) {
			continue
		}
		if first == nil {
			first = d
			for _, name := range costOptions {
				if a, ok := d.Arg(name); ok {
					opts[name] = option{d, a}
				}
			}
			continue
		}
		if mine, theirs := costText(d), costText(first); mine != theirs {
			rc.errorf(costArg(d).NamePos, "%s disagrees with %s: the lines of a method that write cost= or settle= take the call's one cost, reserved and settled together, so they must write the same cost= and settle= (a line without either counts 1 per call)",
				mine, theirs).AddNote(costArg(first).NamePos, "first line with %s", theirs)
		}
	}
	return first
}

// costArg returns the first of line d's cost= and settle=.
func costArg(d *parser.Directive) parser.Arg {
	a, ok := d.Arg(costOptions[0])
	if !ok {
		a, _ = d.Arg(costOptions[1])
	}
	return a
}

// costText writes line d's cost= and settle= as parsed, for messages and
// to compare lines.
func costText(d *parser.Directive) string {
	var parts []string
	for _, name := range costOptions {
		if _, ok := d.Arg(name); ok {
			parts = append(parts, name+"="+optionValue(d, name))
		}
	}
	return strings.Join(parts, " ")
}

// optionValue returns the parsed value of a per-call option, so that
// equivalent spellings (wait=60 and wait=1m) agree.
func optionValue(d *parser.Directive, name string) string {
	switch name {
	case "name":
		return d.Name
	case "cost":
		if d.CostExpr != nil {
			return d.CostExpr.String()
		}
		return strconv.FormatInt(d.Cost, 10)
	case "settle":
		if d.SettleUnits != nil {
			return strconv.FormatInt(*d.SettleUnits, 10)
		}
		return d.Settle.String()
	case "refund":
		if d.RefundExpr != nil {
			return d.RefundExpr.String()
		}
		return d.Refund
	case "wait":
		return d.Wait.String()
	case "onerror":
		return d.OnError
	case "shadow":
		return strconv.FormatBool(d.Shadow)
	}
	return ""
}

// param returns the index of the parameter called name, or -1; of the
// result, while results is set.
func (rc *ruleChecker) param(name string) int {
	params := rc.scope()
	for i := 0; i < params.Len(); i++ {
		if params.At(i).Name() == name {
			return i
		}
	}
	if rc.errAlias && name == "err" {
		return params.Len() - 1
	}
	return -1
}

// paramNames lists the parameters (or results) that can be named, for
// messages.
func (rc *ruleChecker) paramNames() string {
	var names []string
	params := rc.scope()
	for i := 0; i < params.Len(); i++ {
		if n := params.At(i).Name(); n != "" && n != "_" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "it has no named " + rc.noun() + "s"
	}
	return "its " + rc.noun() + "s are " + strings.Join(names, ", ")
}

// streamParam returns the index of the first parameter with a method
// Context() context.Context, such as a gRPC stream, or -1.
func (rc *ruleChecker) streamParam() int {
	params := rc.sig.Params()
	for i := 0; i < params.Len(); i++ {
		obj, _, _ := types.LookupFieldOrMethod(params.At(i).Type(), true, rc.c.pkg.Types, "Context")
		fn, ok := obj.(*types.Func)
		if !ok {
			continue
		}
		sig := fn.Signature()
		if sig.Params().Len() == 0 && sig.Results().Len() == 1 && isContext(sig.Results().At(0).Type()) {
			return i
		}
	}
	return -1
}

// isContext reports whether t is context.Context.
func isContext(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context" && n.Obj().Name() == "Context"
}
