// Package parser reads //ratelimit: directives from Go comments. It knows
// the directive grammar only: the syntax and each value on its own. Whether
// a key= or cost= names a parameter of the method is checked by the
// generator, which knows the types, using the positions recorded here.
//
// The directives are documented once, for their users, in docs/directives.md
// at the root of this module: the syntax, every name with its values and
// default, the rules between the lines of a method, and the comments
// reported as lookalikes. Its table of names lists the names this package
// accepts, in this package's order; a test keeps the two the same.
//
// # Reading directives
//
// [ParseComment] parses one raw comment: a directive line (one that starts
// exactly with [Prefix]) into a [Directive], with every problem found in
// it; an ordinary comment into nothing; and a lookalike, a comment that is
// probably a misspelled directive (such as "// ratelimit:period=1" or
// "//ratelimit period=1"), into an error. [ParseCommentGroup] does the
// same for every comment of a doc comment. A line is parsed on its own:
// what involves the lines of a method together (the per-call options they
// must agree on, a key's emptykey= and keyhash=, one concurrency line at
// most) is checked by the generator.
//
// [Directive.String] renders a directive as a canonical line, which parses
// back to the same values.
//
// # Errors
//
// Every problem is reported as an [Error] at the absolute file position of
// the offending token (the directive's "//" for a missing name), and all
// problems of a line are reported, not just the first, in an [ErrorList].
// An unknown name comes with a suggestion for a likely typo. For example:
//
//	x.go:5:24: unknown name "threshhold"; did you mean threshold?
//	x.go:5:21: period "3x": want whole seconds (30) or a Go duration (500ms, 1m30s)
package parser

import (
	"go/token"
	"strconv"
	"strings"
	"time"
)

// Prefix starts every directive comment.
const Prefix = "//ratelimit:"

// Directive is one parsed //ratelimit: line. Absent optional names leave
// their fields zero.
type Directive struct {
	// Pos is the position of the "//" that starts the directive.
	Pos token.Position
	// Period is the window length (period=); zero with a Calendar period.
	Period time.Duration
	// Calendar is a calendar period (period=day, week, month or year);
	// empty when Period is set.
	Calendar string
	// TZ is the IANA time zone of a Calendar period (tz=); empty when
	// absent (UTC).
	TZ string
	// Threshold is the number of calls admitted per Period (threshold=).
	Threshold int64
	// Key is the per-call key (key=): a path or a call. Nil when absent.
	Key *Expr
	// Name overrides the limit identity (name=); empty when absent.
	Name string
	// Shared names a shared line (shared=): in a type's doc comment, with
	// a limit, the directive declares the line, which adds to the lines of
	// each method the type's decorator limits; alone on a method's line,
	// it has the method take the line declared under that name in the
	// package. Empty when absent.
	Shared string
	// Cost is the static cost (cost=<int>); zero when absent or when
	// CostExpr is set.
	Cost int64
	// CostExpr gives the cost of each call (cost=<path or call>).
	CostExpr *Expr
	// Settle gives the final cost of each call from its results
	// (settle=<path or call>); nil when absent or a number.
	Settle *Expr
	// SettleUnits is a fixed final cost (settle=<int>, such as settle=0);
	// nil when absent or an expression.
	SettleUnits *int64
	// Refund is "error" or "success" (refund=): give the reservation back
	// when the method returns an error, or when it returns none; empty
	// when absent or a function of the error (RefundExpr).
	Refund string
	// RefundExpr is refund=<call>: a function of the method's results
	// (its error) that tells whether to give the reservation back; nil
	// when absent.
	RefundExpr *Expr
	// Concurrency is how many calls may be in flight at once
	// (concurrency=): a line that sets it declares a concurrency limit,
	// without Period and Threshold; zero when absent.
	Concurrency int64
	// Lease is the lease of a concurrency limit's slot (lease=); zero
	// when absent.
	Lease time.Duration
	// Algorithm is the algorithm name (algorithm=); empty when absent.
	Algorithm string
	// Burst is the bucket capacity (burst=); zero when absent.
	Burst int64
	// Capacity bounds the leaky bucket's queue (capacity=); zero when absent.
	Capacity int64
	// Prefetch is how long a lease of the line's limit lasts at most
	// (prefetch=): its calls are admitted from leases; zero when absent.
	Prefetch time.Duration
	// Cooldown reports cooldown=true: an error of the method that carries
	// a retry time (has a RetryAfter() time.Duration method) cools the
	// line's key until then, in every process.
	Cooldown bool
	// Wait is how long a call may wait to be admitted (wait=); zero when absent.
	Wait time.Duration
	// OnError is "allow", "deny" or "local" (onerror=); empty when absent.
	OnError string
	// Shadow reports shadow=true.
	Shadow bool
	// EmptyKey is "share" or "deny" (emptykey=); empty when absent.
	EmptyKey string
	// KeyHash reports keyhash=true.
	KeyHash bool
	// Decorator names the decorator of the type whose doc comment holds
	// the directive (decorator=). A directive that sets it sets nothing
	// else and declares no limit.
	Decorator string
	// Args holds every name=value pair as written, in order, with its
	// position, so later checks can point at the offending token. In a
	// directive with errors it also holds the unknown and repeated names;
	// pairs too malformed to have a name and a value are left out.
	Args []Arg
}

// Arg is one name=value pair as written.
type Arg struct {
	// Name is the argument name, such as "period".
	Name string
	// Value is the value with quotes removed.
	Value string
	// NamePos is the position of the first byte of Name.
	NamePos token.Position
	// ValuePos is the position of the first byte of the value as written
	// (its opening quote when quoted).
	ValuePos token.Position
	// Quoted says the value was written in double quotes.
	Quoted bool
}

// Arg returns the argument called name and whether it was given.
func (d *Directive) Arg(name string) (Arg, bool) {
	for _, a := range d.Args {
		if a.Name == name {
			return a, true
		}
	}
	return Arg{}, false
}

// JoinsShared reports whether d is shared= alone: a method's line that
// takes a shared line declared elsewhere, declaring no limit of its own.
func (d *Directive) JoinsShared() bool {
	return d.Shared != "" && len(d.Args) == 1
}

// String renders d as a canonical directive line: its decorator= or shared= alone, or
// period and threshold (concurrency and lease on a concurrency line), then
// the optional names that are set, in the order of the table of names in
// docs/directives.md.
// A period or wait of whole seconds is rendered as a number of seconds.
// Parsing the result gives back d's values.
func (d *Directive) String() string {
	if d.Decorator != "" {
		return Prefix + "decorator=" + d.Decorator
	}
	if d.JoinsShared() {
		return Prefix + "shared=" + d.Shared
	}
	var b strings.Builder
	b.WriteString(Prefix)
	if d.Concurrency != 0 {
		b.WriteString("concurrency=" + strconv.FormatInt(d.Concurrency, 10))
		if d.Lease != 0 {
			b.WriteString(" lease=" + formatDuration(d.Lease))
		}
	} else {
		period := d.Calendar
		if period == "" {
			period = formatDuration(d.Period)
		}
		b.WriteString("period=" + period)
		b.WriteString(" threshold=" + strconv.FormatInt(d.Threshold, 10))
	}
	add := func(name, value string) {
		b.WriteString(" " + name + "=" + formatValue(value))
	}
	if d.TZ != "" {
		add("tz", d.TZ)
	}
	if d.Key != nil {
		add("key", d.Key.String())
	}
	if d.Name != "" {
		add("name", d.Name)
	}
	if d.Shared != "" {
		add("shared", d.Shared)
	}
	if d.Cost != 0 {
		add("cost", strconv.FormatInt(d.Cost, 10))
	}
	if d.CostExpr != nil {
		add("cost", d.CostExpr.String())
	}
	if d.Settle != nil {
		add("settle", d.Settle.String())
	}
	if d.SettleUnits != nil {
		add("settle", strconv.FormatInt(*d.SettleUnits, 10))
	}
	if d.Refund != "" {
		add("refund", d.Refund)
	}
	if d.RefundExpr != nil {
		add("refund", d.RefundExpr.String())
	}
	if d.Algorithm != "" {
		add("algorithm", d.Algorithm)
	}
	if d.Burst != 0 {
		add("burst", strconv.FormatInt(d.Burst, 10))
	}
	if d.Capacity != 0 {
		add("capacity", strconv.FormatInt(d.Capacity, 10))
	}
	if d.Prefetch != 0 {
		add("prefetch", formatDuration(d.Prefetch))
	}
	if d.Cooldown {
		add("cooldown", "true")
	}
	if d.Wait != 0 {
		add("wait", formatDuration(d.Wait))
	}
	if d.OnError != "" {
		add("onerror", d.OnError)
	}
	if d.Shadow {
		add("shadow", "true")
	}
	if d.EmptyKey != "" {
		add("emptykey", d.EmptyKey)
	}
	if d.KeyHash {
		add("keyhash", "true")
	}
	return b.String()
}

// formatDuration renders v as whole seconds when it is, and otherwise as a
// Go duration.
func formatDuration(v time.Duration) string {
	if v%time.Second == 0 {
		return strconv.FormatInt(int64(v/time.Second), 10)
	}
	return v.String()
}

// formatValue returns v as written in a directive: as is, or quoted when
// it is empty, starts with a quote, or holds a space or a character that
// is not printable.
func formatValue(v string) string {
	if v == "" || v[0] == '"' || strings.ContainsAny(v, " \t") {
		return strconv.Quote(v)
	}
	for _, r := range v {
		if !strconv.IsPrint(r) {
			return strconv.Quote(v)
		}
	}
	return v
}
