// Package parser reads //ratelimit: directives from Go comments. It knows
// the directive grammar only: the syntax and each value on its own. Whether
// a key= or cost= names a parameter of the method is checked by the
// generator, which knows the types, using the positions recorded here.
//
// # Directives
//
// A directive is a line comment that starts exactly with "//ratelimit:",
// with no space after "//" (like //go: directives), followed by name=value
// pairs separated by spaces or tabs:
//
//	//ratelimit:period=30 threshold=2
//	//ratelimit:period=1m30s threshold=100 key=req.UserID name=search
//	//ratelimit:period=1 threshold=10 algorithm=token_bucket burst=20 wait=500ms
//
// A value that contains spaces is double-quoted, with Go string escapes
// (strconv.Unquote); any value may be quoted. Several directives on one
// method declare several limits, each with its own key= (or none).
//
// # Names
//
// Required:
//
//   - period: the window, as whole seconds (period=30) or a Go duration
//     (period=500ms, period=1m30s). It must be at least 1µs, and a whole
//     number of milliseconds with algorithm=fixed_window or
//     algorithm=sliding_window, whose Redis key expires with the window.
//     Or a calendar period: day, week, month or year, whose windows start
//     at local midnight in the zone tz= (a day, at midnight; a week, on
//     Monday, as ISO weeks; a month, on the 1st; a year, on January 1st),
//     so a day lasts 23 or 25 hours where the zone changes its offset. A
//     calendar period counts with fixed_window, its default and only
//     algorithm.
//   - threshold: how many calls (or units of cost) a period admits; a
//     positive whole number (threshold=100), at most 67108863 (2^26-1)
//     with algorithm=sliding_window.
//
// Optional:
//
//   - key: splits the line's limit per value of a Go expression of a small
//     subset (see [Expr]): a parameter (key=userID), a path of fields
//     and methods called without arguments reached from it
//     (key=req.User.ID, key=req.GetOrder().GetTenant()), a call of a
//     function of the package or of a package the file imports, with
//     such expressions as arguments (key=principal(ctx),
//     key=auth.Principal(ctx), key="tenant(ctx, req.Org)", quoted
//     because of the space), or len(x). Each identifier is a Go
//     identifier other than _. A line without key= is one limit for
//     every call of the method, whatever the method's other lines say.
//   - name: the limit identity, shared by every method that uses the same
//     name; by default the method's full name. ASCII letters, digits, '_',
//     '.', '-' and '/', starting with a letter or '_': name=search/v2.
//   - cost: how many units a call takes; a positive whole number
//     (cost=5, at most the threshold), or an expression as for key=
//     (cost=n, cost=req.Size, cost=weight(req), cost=len(req.Skus)).
//     Default 1.
//   - tz: the IANA time zone of a calendar period (tz=Europe/Paris),
//     UTC by default; only with one. The zone must be known to the
//     generating machine's tz database (or Go's embedded copy); the
//     generated code embeds Go's (time/tzdata), so it loads it anywhere.
//   - settle: the final cost of a call, known only once it returns, as an
//     expression as for key= whose identifiers name the method's results
//     instead of its parameters (settle=resp.Usage.TotalTokens,
//     settle=n, settle=len(items)): the call reserves its cost= before
//     it runs (ratelimit.Rule.Reserve), and settles at this cost after
//     (ratelimit.Reservation.Settle), refunding or charging on top the
//     difference. A call that returns a non-nil error, or whose settle
//     value sits behind a nil pointer, stays charged as reserved. The
//     results it reads must be named.
//   - algorithm: one of sliding_log (the default), fixed_window,
//     sliding_window, token_bucket, leaky_bucket, gcra; see [Algorithms].
//   - burst: the bucket capacity of token_bucket and gcra; a positive whole
//     number (burst=20). Only with algorithm=token_bucket or algorithm=gcra.
//   - capacity: the queue bound of leaky_bucket; a positive whole number
//     (capacity=50). Only with algorithm=leaky_bucket.
//   - wait: how long a call may wait to be admitted before it is denied,
//     as whole seconds or a Go duration, zero or more (wait=2, wait=250ms).
//   - onerror: what happens when the limiter fails: allow (let the call
//     through), deny (fail it) or local (decide it in process, against
//     the same limits).
//   - shadow: true or false; shadow=true reports the calls that would be
//     denied without ever denying one.
//   - emptykey: share or deny: what a call whose key (the line's key=)
//     is "" does. With share (the default) such calls share one limit,
//     the key "", like any other key; with deny each fails, uncharged.
//   - keyhash: true or false; keyhash=true limits each call under the
//     SHA-256 digest of its key (the line's key=, ratelimit.KeyDigest),
//     for a key that is a secret, such as an API key or a token, which
//     must not appear in Redis key names, errors or logs.
//
// The generator checks what involves the lines of a method together:
// name, cost, wait, onerror and shadow are the call's and must agree
// where several lines give them; emptykey and keyhash need a key= on
// their line, and lines with the same key= agree on them.
//
// A line may limit the calls in flight instead of the calls per period,
// with concurrency= in place of period= and threshold=:
//
//	//ratelimit:concurrency=10 key=tenant lease=30s
//
// Its own names:
//
//   - concurrency: how many calls (of a key) may be in flight at once,
//     across every process sharing the limiter's backend; a positive
//     whole number. A call holds a slot until it returns (panics
//     included); see ratelimit.Rule.Reserve.
//   - lease: how long the slot of a process that died stays taken, as
//     whole seconds or a Go duration, at least 1ms; default 30s. A call
//     running longer renews it. Only with concurrency=.
//
// A method has at most one concurrency line; it combines with the rate
// lines, all or nothing, and shares their per-call options (key=, wait=,
// onerror=, ...). algorithm=, burst= and capacity= do not go with it.
//
// A type's doc comment may also hold a line that names its decorator
// instead of declaring a limit, alone on its line:
//
//	//ratelimit:decorator=LimitedStore
//
// The value is a Go identifier; the constructor is then NewLimitedStore
// (newLimitedStore for an unexported name).
//
// Each name may appear once. Names are case-sensitive.
//
// # Errors
//
// Every problem is reported as an [Error] at the absolute file position of
// the offending token (the directive's "//" for a missing name), and all
// problems of a line are reported, not just the first: an unknown name
// (with a suggestion for a likely typo), a repeated name, a pair without
// "=", an empty value, an unterminated or invalid quoted value, a value
// that is not valid for its name, a burst= or capacity= without its
// algorithm, a static cost above the threshold, and a period or threshold
// the algorithm cannot decide (see period and threshold above). For
// example:
//
//	x.go:5:24: unknown name "threshhold"; did you mean threshold?
//	x.go:5:21: period "3x": want whole seconds (30) or a Go duration (500ms, 1m30s)
//
// # Lookalikes
//
// A comment that is probably a misspelled directive is reported as an
// error rather than silently ignored. After "//" and any spaces or tabs, a
// line comment is a lookalike when its text
//
//   - starts with "ratelimit:" in any case, then optional spaces or tabs,
//     then a name of ASCII letters or '_' directly followed by "=", but the
//     comment does not start exactly with "//ratelimit:" (a space or tab
//     after "//", or //RateLimit:, //RATELIMIT:), or
//   - starts with "ratelimit" in any case, then spaces or tabs, then a name
//     of ASCII letters or '_' directly followed by "=", as in
//     //ratelimit period=1 (the colon is missing).
//
// A block comment is a lookalike under the same rule applied to its text
// after "/*" and any white space (/*ratelimit:period=1 threshold=2*/).
// Prose that mentions rate limits anywhere but at the start
// ("// The ratelimit: see below"), or that starts with the word but not a
// name= ("// ratelimit is applied per user", "// RateLimit: "api";r=5", the
// HTTP header field), is an ordinary comment.
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
	// Cost is the static cost (cost=<int>); zero when absent or when
	// CostExpr is set.
	Cost int64
	// CostExpr gives the cost of each call (cost=<path or call>).
	CostExpr *Expr
	// Settle gives the final cost of each call from its results
	// (settle=<path or call>); nil when absent.
	Settle *Expr
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

// String renders d as a canonical directive line: its decorator= alone, or
// period and threshold, then the optional names that are set, in the order
// of the package doc.
// A period or wait of whole seconds is rendered as a number of seconds.
// Parsing the result gives back d's values.
func (d *Directive) String() string {
	if d.Decorator != "" {
		return Prefix + "decorator=" + d.Decorator
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
	if d.Cost != 0 {
		add("cost", strconv.FormatInt(d.Cost, 10))
	}
	if d.CostExpr != nil {
		add("cost", d.CostExpr.String())
	}
	if d.Settle != nil {
		add("settle", d.Settle.String())
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
