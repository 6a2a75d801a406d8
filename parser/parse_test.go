package parser

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// source is a Go file whose interface method has a doc comment; %s is the
// comment line under test, on line 5 and indented by a tab, so its "//" is
// at x.go:5:2 and the first name after "//ratelimit:" at x.go:5:14.
const source = `package x

type S interface {
	// Do does it.
	%s
	Do() error
}
`

// parseLine parses line as the second line of Do's doc comment in x.go and
// returns what ParseCommentGroup finds in that doc comment.
func parseLine(t *testing.T, line string) ([]*Directive, ErrorList) {
	t.Helper()
	src := strings.Replace(source, "%s", line, 1)
	fset := token.NewFileSet()
	f, err := goparser.ParseFile(fset, "x.go", src, goparser.ParseComments)
	require.NoError(t, err)
	doc := methodDoc(t, f, "Do")
	require.Len(t, doc.List, 2, "the line must stay one comment of Do's doc")
	return ParseCommentGroup(fset, doc)
}

// methodDoc returns the doc comment of the interface method called name.
func methodDoc(t *testing.T, f *ast.File, name string) *ast.CommentGroup {
	t.Helper()
	var doc *ast.CommentGroup
	ast.Inspect(f, func(n ast.Node) bool {
		if field, ok := n.(*ast.Field); ok && len(field.Names) == 1 && field.Names[0].Name == name {
			doc = field.Doc
		}
		return doc == nil
	})
	require.NotNil(t, doc, "no doc comment on %s", name)
	return doc
}

// errorStrings returns the sorted diagnostics as strings.
func errorStrings(errs ErrorList) []string {
	errs.Sort()
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// values returns d without its positions and raw arguments, for comparing
// what was parsed.
func values(d *Directive) Directive {
	v := *d
	v.Pos = token.Position{}
	v.Args = nil
	return v
}

// reparsed is what parsing a directive's rendering must give back: its
// values, with expressions as they are rendered (their offsets change).
type reparsed struct {
	Directive
	Key, Cost, Settle string
}

func reparsedValues(d *Directive) reparsed {
	r := reparsed{Directive: values(d)}
	if d.Key != nil {
		r.Key, r.Directive.Key = d.Key.String(), nil
	}
	if d.CostExpr != nil {
		r.Cost, r.Directive.CostExpr = d.CostExpr.String(), nil
	}
	if d.Settle != nil {
		r.Settle, r.Directive.Settle = d.Settle.String(), nil
	}
	return r
}

func TestValidDirectives(t *testing.T) {
	tests := []struct {
		line string
		want Directive
	}{
		{"//ratelimit:period=30 threshold=2", Directive{Period: 30 * time.Second, Threshold: 2}},
		{"//ratelimit:period=500ms threshold=1", Directive{Period: 500 * time.Millisecond, Threshold: 1}},
		{"//ratelimit:period=1m30s threshold=100", Directive{Period: 90 * time.Second, Threshold: 100}},
		{"//ratelimit:period=1h threshold=1", Directive{Period: time.Hour, Threshold: 1}},
		{"//ratelimit:period=1us threshold=1", Directive{Period: time.Microsecond, Threshold: 1}},
		{"//ratelimit:period=1µs threshold=1", Directive{Period: time.Microsecond, Threshold: 1}},
		{"//ratelimit:period=1.5s threshold=1", Directive{Period: 1500 * time.Millisecond, Threshold: 1}},
		// The largest period and threshold the runtime decides.
		{"//ratelimit:period=1125899906 threshold=1125899906842623",
			Directive{Period: 1125899906 * time.Second, Threshold: 1125899906842623}},
		{"//ratelimit:threshold=2 period=30", Directive{Period: 30 * time.Second, Threshold: 2}},
		// Tabs separate like spaces; trailing space is fine.
		{"//ratelimit:\tperiod=30\t \tthreshold=2 \t ", Directive{Period: 30 * time.Second, Threshold: 2}},
		// Any value may be quoted, with Go escapes.
		{`//ratelimit:period="30" threshold="2"`, Directive{Period: 30 * time.Second, Threshold: 2}},
		{`//ratelimit:period=1 threshold=1 name="api/v2\x2dsearch"`,
			Directive{Period: time.Second, Threshold: 1, Name: "api/v2-search"}},
		{"//ratelimit:period=1 threshold=1 key=userID",
			Directive{Period: time.Second, Threshold: 1, Key: path(0, "userID")}},
		// Keys and costs from functions of the package or of an import.
		{"//ratelimit:period=1 threshold=1 key=principal(ctx)",
			Directive{Period: time.Second, Threshold: 1, Key: &Expr{Parts: []Part{{Name: "principal", Call: true, Args: []*Expr{path(10, "ctx")}}}}}},
		{`//ratelimit:period=1 threshold=1 key="auth.Principal(ctx, req.Token)" emptykey=deny`,
			Directive{Period: time.Second, Threshold: 1, EmptyKey: "deny",
				Key: &Expr{Parts: []Part{{Name: "auth"}, {Name: "Principal", Offset: 5, Call: true, Args: []*Expr{path(15, "ctx"), path(20, "req", "Token")}}}}}},
		{"//ratelimit:period=1 threshold=9 key=tenant() cost=weight(req) emptykey=share",
			Directive{Period: time.Second, Threshold: 9, EmptyKey: "share",
				Key: &Expr{Parts: []Part{{Name: "tenant", Call: true}}}, CostExpr: &Expr{Parts: []Part{{Name: "weight", Call: true, Args: []*Expr{path(7, "req")}}}}}},
		{"//ratelimit:period=1 threshold=9 cost=req.Size",
			Directive{Period: time.Second, Threshold: 9, CostExpr: path(0, "req", "Size")}},
		// Go's spellings: getters, chains of them, len, calls in arguments.
		{"//ratelimit:period=1 threshold=9 key=req.GetTenant() cost=len(req.Skus)",
			Directive{Period: time.Second, Threshold: 9,
				Key:      &Expr{Parts: []Part{{Name: "req"}, {Name: "GetTenant", Offset: 4, Call: true}}},
				CostExpr: &Expr{Parts: []Part{{Name: "len", Call: true, Args: []*Expr{path(4, "req", "Skus")}}}}}},
		{"//ratelimit:period=1 threshold=9 key=req.GetOrder().GetTenant().ID",
			Directive{Period: time.Second, Threshold: 9,
				Key: &Expr{Parts: []Part{{Name: "req"}, {Name: "GetOrder", Offset: 4, Call: true}, {Name: "GetTenant", Offset: 15, Call: true}, {Name: "ID", Offset: 27}}}}},
		{`//ratelimit:period=1 threshold=9 cost="weight( len(req.GetSkus()) , n )"`,
			Directive{Period: time.Second, Threshold: 9,
				CostExpr: &Expr{Parts: []Part{{Name: "weight", Call: true, Args: []*Expr{
					{Parts: []Part{{Name: "len", Offset: 8, Call: true, Args: []*Expr{{Parts: []Part{{Name: "req", Offset: 12}, {Name: "GetSkus", Offset: 16, Call: true}}}}}}},
					path(29, "n"),
				}}}}}},
		// A type's decorator is named alone on its line.
		{"//ratelimit:decorator=LimitedStore", Directive{Decorator: "LimitedStore"}},
		{"//ratelimit:decorator=limitedStore", Directive{Decorator: "limitedStore"}},
		{"//ratelimit:period=1 threshold=1 key=req.User.ID",
			Directive{Period: time.Second, Threshold: 1, Key: path(0, "req", "User", "ID")}},
		{"//ratelimit:period=1 threshold=1 key=über.Größe",
			Directive{Period: time.Second, Threshold: 1, Key: path(0, "über", "Größe")}},
		{"//ratelimit:period=1 threshold=1 name=_internal.search-v2/get",
			Directive{Period: time.Second, Threshold: 1, Name: "_internal.search-v2/get"}},
		{"//ratelimit:period=1 threshold=10 cost=10", Directive{Period: time.Second, Threshold: 10, Cost: 10}},
		// A bucket admits up to its burst or capacity at once.
		{"//ratelimit:period=1 threshold=5 cost=20 algorithm=token_bucket burst=20",
			Directive{Period: time.Second, Threshold: 5, Cost: 20, Algorithm: "token_bucket", Burst: 20}},
		{"//ratelimit:period=1 threshold=5 cost=9 algorithm=leaky_bucket capacity=9",
			Directive{Period: time.Second, Threshold: 5, Cost: 9, Algorithm: "leaky_bucket", Capacity: 9}},
		{"//ratelimit:period=1 threshold=10 cost=n", Directive{Period: time.Second, Threshold: 10, CostExpr: path(0, "n")}},
		{"//ratelimit:period=1 threshold=1 algorithm=sliding_log",
			Directive{Period: time.Second, Threshold: 1, Algorithm: "sliding_log"}},
		{"//ratelimit:period=1 threshold=1 algorithm=fixed_window",
			Directive{Period: time.Second, Threshold: 1, Algorithm: "fixed_window"}},
		{"//ratelimit:period=1 threshold=1 algorithm=sliding_window",
			Directive{Period: time.Second, Threshold: 1, Algorithm: "sliding_window"}},
		// The window algorithms need whole milliseconds; the others keep µs.
		{"//ratelimit:period=2ms threshold=1 algorithm=fixed_window",
			Directive{Period: 2 * time.Millisecond, Threshold: 1, Algorithm: "fixed_window"}},
		{"//ratelimit:period=1500us threshold=1 algorithm=sliding_log",
			Directive{Period: 1500 * time.Microsecond, Threshold: 1, Algorithm: "sliding_log"}},
		// sliding_window counts up to 2^26-1; fixed_window has no such bound.
		{"//ratelimit:period=1 threshold=67108863 algorithm=sliding_window",
			Directive{Period: time.Second, Threshold: 67108863, Algorithm: "sliding_window"}},
		{"//ratelimit:period=1 threshold=67108864 algorithm=fixed_window",
			Directive{Period: time.Second, Threshold: 67108864, Algorithm: "fixed_window"}},
		{"//ratelimit:period=1 threshold=1 algorithm=token_bucket burst=20",
			Directive{Period: time.Second, Threshold: 1, Algorithm: "token_bucket", Burst: 20}},
		{"//ratelimit:period=1 threshold=1 burst=20 algorithm=gcra",
			Directive{Period: time.Second, Threshold: 1, Algorithm: "gcra", Burst: 20}},
		{"//ratelimit:period=1 threshold=1 algorithm=leaky_bucket capacity=50",
			Directive{Period: time.Second, Threshold: 1, Algorithm: "leaky_bucket", Capacity: 50}},
		{"//ratelimit:period=1 threshold=1 wait=0", Directive{Period: time.Second, Threshold: 1}},
		{"//ratelimit:period=1 threshold=1 wait=2", Directive{Period: time.Second, Threshold: 1, Wait: 2 * time.Second}},
		{"//ratelimit:period=1 threshold=1 wait=250ms",
			Directive{Period: time.Second, Threshold: 1, Wait: 250 * time.Millisecond}},
		{"//ratelimit:period=1 threshold=1 onerror=allow", Directive{Period: time.Second, Threshold: 1, OnError: "allow"}},
		{"//ratelimit:period=1 threshold=1 onerror=deny", Directive{Period: time.Second, Threshold: 1, OnError: "deny"}},
		{"//ratelimit:period=1 threshold=1 onerror=local", Directive{Period: time.Second, Threshold: 1, OnError: "local"}},
		{"//ratelimit:period=1 threshold=1 shadow=true", Directive{Period: time.Second, Threshold: 1, Shadow: true}},
		{"//ratelimit:period=1 threshold=1 shadow=false", Directive{Period: time.Second, Threshold: 1}},
		{"//ratelimit:period=1m threshold=100 key=req.UserID name=search cost=n algorithm=token_bucket burst=200 wait=1s onerror=deny shadow=true",
			Directive{Period: time.Minute, Threshold: 100, Key: path(0, "req", "UserID"), Name: "search", CostExpr: path(0, "n"),
				Algorithm: "token_bucket", Burst: 200, Wait: time.Second, OnError: "deny", Shadow: true}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			ds, errs := parseLine(t, tt.line)
			require.Empty(t, errorStrings(errs))
			require.Len(t, ds, 1)
			assert.Equal(t, tt.want, values(ds[0]))
			assert.Equal(t, "x.go:5:2", ds[0].Pos.String())
		})
	}
}

func TestDirectiveErrors(t *testing.T) {
	const wantDuration = "want whole seconds (30) or a Go duration (500ms, 1m30s)"
	tests := []struct {
		line string
		want []string
	}{
		// Structure.
		{"//ratelimit:", []string{
			"x.go:5:2: missing required period",
			"x.go:5:2: missing required threshold",
		}},
		{"//ratelimit:   ", []string{
			"x.go:5:2: missing required period",
			"x.go:5:2: missing required threshold",
		}},
		{"//ratelimit:threshold=2", []string{"x.go:5:2: missing required period"}},
		{"//ratelimit:period=30", []string{"x.go:5:2: missing required threshold"}},
		{"//ratelimit:period=30 threshhold=2", []string{
			`x.go:5:24: unknown name "threshhold"; did you mean threshold?`,
		}},
		{"//ratelimit:perod=30 threshold=2", []string{
			`x.go:5:14: unknown name "perod"; did you mean period?`,
		}},
		{"//ratelimit:Period=30 threshold=2", []string{
			`x.go:5:14: unknown name "Period"; did you mean period?`,
		}},
		{"//ratelimit:period=30 threshold=2 on_error=deny", []string{
			`x.go:5:36: unknown name "on_error"; did you mean onerror?`,
		}},
		{"//ratelimit:period=30 threshold=2 foo=1", []string{
			`x.go:5:36: unknown name "foo"; want one of period, threshold, tz, key, name, shared, cost, settle, refund, concurrency, lease, algorithm, burst, capacity, prefetch, cooldown, wait, onerror, shadow, emptykey, keyhash, decorator`,
		}},
		{"//ratelimit:period=30 threshold=2 period=60", []string{
			"x.go:5:36: duplicate period\n\tx.go:5:14: first period",
		}},
		{"//ratelimit:period=30 threshold=2 period=x", []string{
			"x.go:5:36: duplicate period\n\tx.go:5:14: first period",
			`x.go:5:43: period "x": ` + wantDuration,
		}},
		{"//ratelimit:decorator=Limited period=30 threshold=2", []string{
			"x.go:5:14: decorator= stands alone on its line: it names the type's decorator; write the limits on lines of their own",
		}},
		{"//ratelimit:period=30 decorator=Limited", []string{
			"x.go:5:24: decorator= stands alone on its line: it names the type's decorator; write the limits on lines of their own",
		}},
		{"//ratelimit:period=1 threshold=1 key=f(ctx", []string{
			`x.go:5:39: key "f(ctx": a call must end with ")": principal(ctx)`,
		}},
		{"//ratelimit:period=1 threshold=1 key=req.Skus[0]", []string{
			`x.go:5:39: key "req.Skus[0]": unexpected "[0]": ` + Accepted,
		}},
		{"//ratelimit:period=1 threshold=1 cost=*n", []string{
			`x.go:5:40: cost "*n": unexpected "*n": ` + Accepted,
		}},
		{"//ratelimit:period=1 threshold=1 key=f(ctx))", []string{
			`x.go:5:39: key "f(ctx))": unexpected ")": ` + Accepted,
		}},
		{"//ratelimit:period=1 threshold=1 key=" + strings.Repeat("f(", 9) + "x" + strings.Repeat(")", 9), []string{
			`x.go:5:39: key "f(f(f(f(f(f(f(f(f(x)))))))))": calls nest more than 8 deep`,
		}},
		{"//ratelimit:period=1 threshold=1 key=f(a,,b)", []string{
			`x.go:5:39: key "f(a,,b)": unexpected ",b)": ` + Accepted,
		}},
		{"//ratelimit:period=1 threshold=1 emptykey=no", []string{`x.go:5:44: emptykey "no": want share or deny`}},
		{"//ratelimit:period=1 threshold=1 keyhash=yes", []string{`x.go:5:43: keyhash "yes": want true or false`}},
		{"//ratelimit:decorator=1x", []string{`x.go:5:24: decorator "1x": want a Go identifier to name the decorator type`}},
		{"//ratelimit:decorator=_", []string{`x.go:5:24: decorator "_": want a Go identifier to name the decorator type`}},
		{"//ratelimit:decorator=A decorator=B", []string{"x.go:5:26: duplicate decorator\n\tx.go:5:14: first decorator"}},
		{"//ratelimit:period 30 threshold=2", []string{
			`x.go:5:14: expected name=value, found "period"`,
			`x.go:5:21: expected name=value, found "30"`,
		}},
		{"//ratelimit:period=30 threshold=2 shadow", []string{
			`x.go:5:36: expected name=value, found "shadow"`,
		}},
		{"//ratelimit:period= threshold=2", []string{"x.go:5:14: empty value for period"}},
		{`//ratelimit:period=30 threshold=2 name=""`, []string{"x.go:5:36: empty value for name"}},
		{"//ratelimit:=5 period=1 threshold=1", []string{`x.go:5:14: missing name before "="`}},
		{`//ratelimit:period=30 threshold=2 name="a b`, []string{"x.go:5:41: quoted value not terminated"}},
		{`//ratelimit:period=30 threshold=2 name="a\"`, []string{"x.go:5:41: quoted value not terminated"}},
		{`//ratelimit:period=30 threshold=2 name="a\qb"`, []string{"x.go:5:41: invalid escape in quoted value"}},
		{`//ratelimit:period=30 threshold=2 name="ab"c`, []string{`x.go:5:45: expected space after quoted value, found "c"`}},
		// period.
		{"//ratelimit:period=3x threshold=2", []string{`x.go:5:21: period "3x": ` + wantDuration}},
		{"//ratelimit:period=30sec threshold=2", []string{`x.go:5:21: period "30sec": ` + wantDuration}},
		{"//ratelimit:period=0 threshold=2", []string{`x.go:5:21: period "0": must be positive`}},
		{"//ratelimit:period=0s threshold=2", []string{`x.go:5:21: period "0s": must be positive`}},
		{"//ratelimit:period=-5 threshold=2", []string{`x.go:5:21: period "-5": must be positive`}},
		{"//ratelimit:period=-5s threshold=2", []string{`x.go:5:21: period "-5s": must be positive`}},
		{"//ratelimit:period=500ns threshold=2", []string{`x.go:5:21: period "500ns": must be at least 1µs`}},
		{"//ratelimit:period=9223372037 threshold=2", []string{
			`x.go:5:21: period "9223372037": too long (max 9223372036 seconds)`,
		}},
		{"//ratelimit:period=99999999999999999999 threshold=2", []string{
			`x.go:5:21: period "99999999999999999999": too long (max 9223372036 seconds)`,
		}},
		{"//ratelimit:period=3000000h threshold=2", []string{
			`x.go:5:21: period "3000000h": too long (max 2562047h47m16s)`,
		}},
		// Periods and thresholds the grammar reads but the runtime cannot decide.
		{"//ratelimit:period=1125899907 threshold=2", []string{
			`x.go:5:14: period 312749h58m27s is longer than 312749h58m26.842623s`,
		}},
		{"//ratelimit:period=9223372036 threshold=9223372036854775807", []string{
			`x.go:5:14: period 2562047h47m16s is longer than 312749h58m26.842623s`,
		}},
		// threshold.
		{"//ratelimit:period=30 threshold=0", []string{`x.go:5:34: threshold "0": must be positive`}},
		{"//ratelimit:period=30 threshold=-1", []string{`x.go:5:34: threshold "-1": must be positive`}},
		{"//ratelimit:period=30 threshold=1.5", []string{`x.go:5:34: threshold "1.5": want a positive whole number`}},
		{"//ratelimit:period=30 threshold=ten", []string{`x.go:5:34: threshold "ten": want a positive whole number`}},
		{"//ratelimit:period=30 threshold=1125899906842624", []string{
			`x.go:5:24: threshold 1125899906842624 is above 1125899906842623`,
		}},
		{"//ratelimit:period=30 threshold=9223372036854775808", []string{
			`x.go:5:34: threshold "9223372036854775808": too large (max 9223372036854775807)`,
		}},
		// key.
		{"//ratelimit:period=30 threshold=2 key=_", []string{
			`x.go:5:40: key "_": the blank identifier _ names no parameter or field`,
		}},
		{"//ratelimit:period=30 threshold=2 key=req._", []string{
			`x.go:5:40: key "req._": the blank identifier _ names no parameter or field`,
		}},
		{"//ratelimit:period=30 threshold=2 key=req..ID", []string{
			`x.go:5:40: key "req..ID": unexpected ".ID": ` + Accepted,
		}},
		{"//ratelimit:period=30 threshold=2 key=req.", []string{
			`x.go:5:40: key "req.": ` + Accepted,
		}},
		{"//ratelimit:period=30 threshold=2 key=1x", []string{`x.go:5:40: key "1x": "1x" is not a Go identifier`}},
		{"//ratelimit:period=30 threshold=2 key=user-id", []string{
			`x.go:5:40: key "user-id": "user-id" is not a Go identifier`,
		}},
		{"//ratelimit:period=30 threshold=2 key=req.type", []string{
			`x.go:5:40: key "req.type": type is a Go keyword, not a parameter or field`,
		}},
		// name.
		{"//ratelimit:period=30 threshold=2 name=9x", []string{
			`x.go:5:41: name "9x": want letters, digits, '_', '.', '-' and '/', starting with a letter or '_'`,
		}},
		{`//ratelimit:period=30 threshold=2 name="a b"`, []string{
			`x.go:5:41: name "a b": want letters, digits, '_', '.', '-' and '/', starting with a letter or '_'`,
		}},
		// cost.
		{"//ratelimit:period=30 threshold=2 cost=0", []string{`x.go:5:41: cost "0": must be positive`}},
		{"//ratelimit:period=30 threshold=2 cost=-1", []string{`x.go:5:41: cost "-1": must be positive`}},
		{"//ratelimit:period=30 threshold=2 cost=1.5", []string{
			`x.go:5:41: cost "1.5": want a positive whole number, a parameter, a path or a function call`,
		}},
		{"//ratelimit:period=30 threshold=2 cost=a-b", []string{
			`x.go:5:41: cost "a-b": "a-b" is not a Go identifier`,
		}},
		{"//ratelimit:period=30 threshold=2 cost=_", []string{
			`x.go:5:41: cost "_": the blank identifier _ names no parameter or field`,
		}},
		{"//ratelimit:period=30 threshold=2 cost=range", []string{
			`x.go:5:41: cost "range": range is a Go keyword, not a parameter or field`,
		}},
		{"//ratelimit:period=30 threshold=2 cost=3", []string{
			"x.go:5:36: cost 3 exceeds threshold 2: no call could ever be admitted",
		}},
		{"//ratelimit:period=30 threshold=2 cost=21 algorithm=gcra burst=20", []string{
			"x.go:5:36: cost 21 exceeds burst 20: no call could ever be admitted",
		}},
		{"//ratelimit:period=30 threshold=2 cost=10 algorithm=leaky_bucket capacity=9", []string{
			"x.go:5:36: cost 10 exceeds capacity 9: no call could ever be admitted",
		}},
		// algorithm, burst, capacity.
		{"//ratelimit:period=30 threshold=2 algorithm=tokenbucket", []string{
			`x.go:5:46: algorithm "tokenbucket": unknown algorithm; did you mean token_bucket?`,
		}},
		{"//ratelimit:period=30 threshold=2 algorithm=GCRA", []string{
			`x.go:5:46: algorithm "GCRA": unknown algorithm; did you mean gcra?`,
		}},
		{"//ratelimit:period=30 threshold=2 algorithm=magic", []string{
			`x.go:5:46: algorithm "magic": unknown algorithm; want one of sliding_log, fixed_window, sliding_window, token_bucket, leaky_bucket, gcra`,
		}},
		{"//ratelimit:period=30 threshold=2 burst=5", []string{
			"x.go:5:36: burst needs algorithm=token_bucket or algorithm=gcra",
		}},
		{"//ratelimit:period=30 threshold=2 burst=5 algorithm=fixed_window", []string{
			"x.go:5:36: burst needs algorithm=token_bucket or algorithm=gcra",
		}},
		{"//ratelimit:period=30 threshold=2 burst=5 algorithm=tokenbucket", []string{
			`x.go:5:54: algorithm "tokenbucket": unknown algorithm; did you mean token_bucket?`,
		}},
		{"//ratelimit:period=30 threshold=2 algorithm=gcra burst=0", []string{`x.go:5:57: burst "0": must be positive`}},
		{"//ratelimit:period=1 threshold=1 algorithm=gcra burst=1125899906842623", []string{
			"x.go:5:50: 1125899906842623 units at 1 per 1s take longer than 312749h58m26.842623s to drain",
		}},
		{"//ratelimit:period=1 threshold=1 algorithm=leaky_bucket capacity=1125899906842624", []string{
			"x.go:5:58: burst or capacity 1125899906842624 is above 1125899906842623",
		}},
		{"//ratelimit:period=1500us threshold=2 algorithm=fixed_window", []string{
			"x.go:5:14: period 1.5ms: fixed_window needs a whole number of milliseconds (its Redis key expires with the window)",
		}},
		{"//ratelimit:period=1.5ms threshold=2 algorithm=sliding_window", []string{
			"x.go:5:14: period 1.5ms: sliding_window needs a whole number of milliseconds (its Redis key expires with the window)",
		}},
		{"//ratelimit:period=1 threshold=67108864 algorithm=sliding_window", []string{
			"x.go:5:23: threshold 67108864 is above 67108863, the most sliding_window counts (use fixed_window, token_bucket or gcra)",
		}},
		{"//ratelimit:algorithm=sliding_window threshold=100000000 period=1500us", []string{
			"x.go:5:39: threshold 100000000 is above 67108863, the most sliding_window counts (use fixed_window, token_bucket or gcra)",
			"x.go:5:59: period 1.5ms: sliding_window needs a whole number of milliseconds (its Redis key expires with the window)",
		}},
		// An invalid algorithm is reported alone.
		{"//ratelimit:period=1500us threshold=100000000 algorithm=slidingwindow", []string{
			`x.go:5:58: algorithm "slidingwindow": unknown algorithm; did you mean sliding_window?`,
		}},
		{"//ratelimit:period=30 threshold=2 capacity=5 algorithm=gcra", []string{
			"x.go:5:36: capacity needs algorithm=leaky_bucket",
		}},
		{"//ratelimit:period=30 threshold=2 algorithm=leaky_bucket capacity=x", []string{
			`x.go:5:68: capacity "x": want a positive whole number`,
		}},
		// wait, onerror, shadow.
		{"//ratelimit:period=30 threshold=2 wait=-1s", []string{`x.go:5:41: wait "-1s": must not be negative`}},
		{"//ratelimit:period=30 threshold=2 wait=-99999999999", []string{
			`x.go:5:41: wait "-99999999999": must not be negative`,
		}},
		{"//ratelimit:period=30 threshold=2 wait=soon", []string{`x.go:5:41: wait "soon": ` + wantDuration}},
		{"//ratelimit:period=30 threshold=2 onerror=block", []string{`x.go:5:44: onerror "block": want allow, deny or local`}},
		{"//ratelimit:period=30 threshold=2 onerror=lcoal", []string{`x.go:5:44: onerror "lcoal": unknown policy; did you mean local?`}},
		{"//ratelimit:period=30 threshold=2 onerror=Local", []string{`x.go:5:44: onerror "Local": unknown policy; did you mean local?`}},
		{"//ratelimit:period=30 threshold=2 onerror=alow", []string{`x.go:5:44: onerror "alow": unknown policy; did you mean allow?`}},
		{"//ratelimit:period=30 threshold=2 shadow=1", []string{`x.go:5:43: shadow "1": want true or false`}},
		{"//ratelimit:period=30 threshold=2 shadow=TRUE", []string{`x.go:5:43: shadow "TRUE": want true or false`}},
		// shared=: a rate limit, or alone.
		{"//ratelimit:shared=global period=1 threshold=5 cost=2 wait=1s", []string{
			"x.go:5:49: cost= does not go with shared=: a shared line is a rate limit (period=, threshold= and its key=); each method that takes it writes its cost= on its own lines",
			"x.go:5:56: wait= does not go with shared=: a shared line is a rate limit (period=, threshold= and its key=); each method that takes it writes its wait= on its own lines",
		}},
		{"//ratelimit:shared=global concurrency=3", []string{
			"x.go:5:28: concurrency= does not go with shared=: a shared line is a rate limit (period=, threshold= and its key=); each method that takes it writes its concurrency= on its own lines",
		}},
		{"//ratelimit:shared=global key=tenant", []string{"x.go:5:2: missing required period", "x.go:5:2: missing required threshold"}},
		{"//ratelimit:shared=9lives period=1 threshold=5", []string{
			`x.go:5:21: shared "9lives": want letters, digits, '_', '.', '-' and '/', starting with a letter or '_'`,
		}},
		// Every error of a line is reported.
		{"//ratelimit:period=x threshold=0 foo=1 key=_ period=1", []string{
			`x.go:5:21: period "x": ` + wantDuration,
			`x.go:5:33: threshold "0": must be positive`,
			`x.go:5:35: unknown name "foo"; want one of period, threshold, tz, key, name, shared, cost, settle, refund, concurrency, lease, algorithm, burst, capacity, prefetch, cooldown, wait, onerror, shadow, emptykey, keyhash, decorator`,
			`x.go:5:45: key "_": the blank identifier _ names no parameter or field`,
			"x.go:5:47: duplicate period\n\tx.go:5:14: first period",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			ds, errs := parseLine(t, tt.line)
			assert.Equal(t, tt.want, errorStrings(errs))
			assert.Len(t, ds, 1, "a directive line gives a directive, even with errors")
		})
	}
}

func TestLookalikes(t *testing.T) {
	tests := []struct {
		line string
		want string // empty: an ordinary comment
	}{
		{"// ratelimit:period=1 threshold=1",
			`x.go:5:2: "// ratelimit:" is not a directive: write "//ratelimit:" with no space after "//"`},
		{"//  ratelimit:period=1 threshold=1",
			`x.go:5:2: "//  ratelimit:" is not a directive: write "//ratelimit:" with no space after "//"`},
		{"//\tratelimit:period=1 threshold=1",
			`x.go:5:2: "//\tratelimit:" is not a directive: write "//ratelimit:" with no space after "//"`},
		{"// ratelimit: period=1 threshold=1",
			`x.go:5:2: "// ratelimit:" is not a directive: write "//ratelimit:" with no space after "//"`},
		{"//RateLimit:period=1 threshold=1",
			`x.go:5:2: "//RateLimit:" is not a directive: write "//ratelimit:" in lower case`},
		{"//RATELIMIT:period=1 threshold=1",
			`x.go:5:2: "//RATELIMIT:" is not a directive: write "//ratelimit:" in lower case`},
		{"// RateLimit:period=1",
			`x.go:5:2: "// RateLimit:" is not a directive: write "//ratelimit:" with no space after "//" and in lower case`},
		{"//ratelimit period=1 threshold=1",
			`x.go:5:2: "//ratelimit" is not a directive: write "//ratelimit:" with a colon after "ratelimit"`},
		{"//ratelimit\tperiod=1",
			`x.go:5:2: "//ratelimit" is not a directive: write "//ratelimit:" with a colon after "ratelimit"`},
		{"// RateLimit  period=1",
			`x.go:5:2: "// RateLimit" is not a directive: write "//ratelimit:" with no space after "//" and in lower case and with a colon after "ratelimit"`},
		{"/*ratelimit:period=1 threshold=1*/",
			`x.go:5:2: "/*ratelimit:" is not a directive: write "//ratelimit:" as a line comment`},
		{"/* ratelimit:period=1 threshold=1 */",
			`x.go:5:2: "/* ratelimit:" is not a directive: write "//ratelimit:" as a line comment`},
		{"/*ratelimit period=1*/",
			`x.go:5:2: "/*ratelimit" is not a directive: write "//ratelimit:" as a line comment`},
		// Near misses: a word within two edits of "ratelimit", or the word
		// followed by "=", before a name=.
		{"//ratelimt:period=1 threshold=1",
			`x.go:5:2: "//ratelimt:" is not a directive: did you mean //ratelimit:?`},
		{"//ratelimits:period=1 threshold=1",
			`x.go:5:2: "//ratelimits:" is not a directive: did you mean //ratelimit:?`},
		{"//ratelimit=period=1 threshold=1",
			`x.go:5:2: "//ratelimit=" is not a directive: did you mean //ratelimit:?`},
		{"//rate-limit:period=1 threshold=1",
			`x.go:5:2: "//rate-limit:" is not a directive: did you mean //ratelimit:?`},
		{"//rate_limit: period=1 threshold=1",
			`x.go:5:2: "//rate_limit:" is not a directive: did you mean //ratelimit:?`},
		{"// RateLimt:period=1",
			`x.go:5:2: "// RateLimt:" is not a directive: did you mean //ratelimit:?`},
		{"//rtaelimit:period=1",
			`x.go:5:2: "//rtaelimit:" is not a directive: did you mean //ratelimit:?`},
		{"//ratelimt period=1",
			`x.go:5:2: "//ratelimt" is not a directive: did you mean //ratelimit:?`},
		{"//ratelimt=period=1",
			`x.go:5:2: "//ratelimt=" is not a directive: did you mean //ratelimit:?`},
		{"/*ratelimt:period=1 threshold=1*/",
			`x.go:5:2: "/*ratelimt:" is not a directive: did you mean //ratelimit:?`},
		// Ordinary comments.
		{"// ratelimit: see the docs", ""},
		{"// rate limits: see the docs", ""},
		{"// rate-limit: the calls of a key, as key=value pairs below", ""},
		{"// ratelimited: a call denied, with n=3 retries", ""},
		{"// ratelimit=5 is the default", ""},
		{"// ratelimiting is done by the decorator, so x=1 holds", ""},
		{"// RateLimiter limits calls.", ""},
		{"//ratelimitgen:period=1", ""},
		{"//limit:period=1", ""},
		{"//nolint:ratelimit", ""},
		{"//lint:ignore SA1019 period=1", ""},
		{"//\tRateLimit: \"api\";r=5;t=30", ""},
		{"// RateLimit-Policy: \"api\";q=100;w=60", ""},
		{"// RateLimit:", ""},
		{"// This ratelimit: is explained below.", ""},
		{"// ratelimit is applied per user, so n=1 means one call.", ""},
		{"// ratelimits: plural is prose.", ""},
		{"//ratelimiter: a different word.", ""},
		{"// RateLimit returns the limit.", ""},
		{"// ratelimit", ""},
		{"//ratelimit", ""},
		{"//go:generate ratelimitgen", ""},
		{"///ratelimit:period=1 threshold=1", ""},
		{"/* period=1 threshold=1 */", ""},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			ds, errs := parseLine(t, tt.line)
			assert.Empty(t, ds)
			if tt.want == "" {
				assert.Empty(t, errorStrings(errs))
			} else {
				assert.Equal(t, []string{tt.want}, errorStrings(errs))
			}
		})
	}
}

func TestArgPositions(t *testing.T) {
	ds, errs := parseLine(t, `//ratelimit:period=30	name="a/b" threshold=2`)
	require.Empty(t, errorStrings(errs))
	require.Len(t, ds, 1)
	d := ds[0]
	want := []struct{ name, value, namePos, valuePos string }{
		{"period", "30", "x.go:5:14", "x.go:5:21"},
		{"name", "a/b", "x.go:5:24", "x.go:5:29"},
		{"threshold", "2", "x.go:5:35", "x.go:5:45"},
	}
	require.Len(t, d.Args, len(want))
	for i, w := range want {
		a := d.Args[i]
		assert.Equal(t, w.name, a.Name)
		assert.Equal(t, w.value, a.Value)
		assert.Equal(t, w.namePos, a.NamePos.String())
		assert.Equal(t, w.valuePos, a.ValuePos.String())
	}
	// Offsets agree with columns: both count bytes.
	src := strings.Replace(source, "%s", `//ratelimit:period=30	name="a/b" threshold=2`, 1)
	assert.Equal(t, `"a/b"`, src[d.Args[1].ValuePos.Offset:d.Args[1].ValuePos.Offset+5])

	a, ok := d.Arg("name")
	assert.True(t, ok)
	assert.Equal(t, "a/b", a.Value)
	_, ok = d.Arg("key")
	assert.False(t, ok)
}

func TestParseCommentGroup(t *testing.T) {
	const src = `package x

import "context"

// Store keeps things.
type Store interface {
	// Get returns the thing.
	//
	//ratelimit:period=1 threshold=10 key=id
	//ratelimit:period=1m threshold=100 key=id
	// ratelimit:period=1h threshold=1000
	Get(ctx context.Context, id string) (string, error)

	// Put is not limited.
	Put(ctx context.Context, id, v string) error
}
`
	fset := token.NewFileSet()
	f, err := goparser.ParseFile(fset, "store.go", src, goparser.ParseComments)
	require.NoError(t, err)

	ds, errs := ParseCommentGroup(fset, methodDoc(t, f, "Get"))
	require.Len(t, ds, 2)
	assert.Equal(t, "store.go:9:2", ds[0].Pos.String())
	assert.Equal(t, time.Second, ds[0].Period)
	assert.Equal(t, "store.go:10:2", ds[1].Pos.String())
	assert.Equal(t, time.Minute, ds[1].Period)
	assert.Equal(t, []string{
		`store.go:11:2: "// ratelimit:" is not a directive: write "//ratelimit:" with no space after "//"`,
	}, errorStrings(errs))
	// The doc text that go/doc shows leaves the directives out.
	assert.Equal(t, "Get returns the thing.\n\nratelimit:period=1h threshold=1000\n",
		methodDoc(t, f, "Get").Text())

	ds, errs = ParseCommentGroup(fset, methodDoc(t, f, "Put"))
	assert.Empty(t, ds)
	assert.Empty(t, errs)

	ds, errs = ParseCommentGroup(fset, nil)
	assert.Nil(t, ds)
	assert.Nil(t, errs)
}

func TestParseCommentGroupCRLF(t *testing.T) {
	src := strings.ReplaceAll(strings.Replace(source, "%s", "//ratelimit:period=30 threshold=2 key=id", 1), "\n", "\r\n")
	fset := token.NewFileSet()
	f, err := goparser.ParseFile(fset, "x.go", src, goparser.ParseComments)
	require.NoError(t, err)
	ds, errs := ParseCommentGroup(fset, methodDoc(t, f, "Do"))
	require.Empty(t, errorStrings(errs))
	require.Len(t, ds, 1)
	assert.Equal(t, path(0, "id"), ds[0].Key)
}

func TestParseCommentOrdinary(t *testing.T) {
	pos := token.Position{Filename: "a.go", Offset: 10, Line: 2, Column: 1}
	for _, text := range []string{"", "/", "// hello", "/* hello */", "x", "//", "/**/"} {
		d, errs := ParseComment(pos, text)
		assert.Nil(t, d, "%q", text)
		assert.Nil(t, errs, "%q", text)
	}
}

func TestParseCommentPositions(t *testing.T) {
	// Positions are relative to pos, including the offset.
	pos := token.Position{Filename: "a.go", Offset: 100, Line: 7, Column: 9}
	d, errs := ParseComment(pos, "//ratelimit:period=30 threshold=x")
	require.NotNil(t, d)
	require.Len(t, errs, 1)
	assert.Equal(t, token.Position{Filename: "a.go", Offset: 132, Line: 7, Column: 41}, errs[0].Pos)
	assert.Equal(t, token.Position{Filename: "a.go", Offset: 112, Line: 7, Column: 21}, d.Args[0].NamePos)
}

func TestLongLines(t *testing.T) {
	// Long lines stay linear and messages stay short.
	long := strings.Repeat("a", 1<<20)
	pos := token.Position{Filename: "a.go", Line: 1, Column: 1}
	_, errs := ParseComment(pos, "//ratelimit:period=1 threshold=1 "+long+"=1")
	require.Len(t, errs, 1)
	assert.Less(t, len(errs[0].Msg), 270) // the name cut short, and the list of names

	_, errs = ParseComment(pos, "//ratelimit:period=1 threshold=1"+strings.Repeat(" x=1", 1<<16))
	assert.Len(t, errs, 1<<16)

	d, errs := ParseComment(pos, "//ratelimit:period=1 threshold=1 key="+strings.Repeat("a.", 1<<16)+"b")
	assert.Empty(t, errs)
	assert.Len(t, d.Key.Parts, 1<<16+1)
}

func TestString(t *testing.T) {
	tests := []struct {
		line string
		want string
	}{
		{"//ratelimit:threshold=2 period=30s", "//ratelimit:period=30 threshold=2"},
		{"//ratelimit:period=1m30s threshold=2", "//ratelimit:period=90 threshold=2"},
		{"//ratelimit:period=1500ms threshold=2", "//ratelimit:period=1.5s threshold=2"},
		{`//ratelimit:shadow=true onerror=deny wait=1ms burst=3 algorithm=gcra cost=n name="a" key=req.ID period=1 threshold=5`,
			"//ratelimit:period=1 threshold=5 key=req.ID name=a cost=n algorithm=gcra burst=3 wait=1ms onerror=deny shadow=true"},
		{`//ratelimit:decorator="Limited"`, "//ratelimit:decorator=Limited"},
		{"//ratelimit:shared=global", "//ratelimit:shared=global"},
		{"//ratelimit:key=tenant threshold=100 period=month shared=tenant-quota algorithm=fixed_window",
			"//ratelimit:period=month threshold=100 key=tenant shared=tenant-quota algorithm=fixed_window"},
		{`//ratelimit:emptykey=deny key="f(a, b.C)" cost="g( n )" period=1 threshold=5`,
			"//ratelimit:period=1 threshold=5 key=f(a,b.C) cost=g(n) emptykey=deny"},
		{"//ratelimit:onerror=local period=1 threshold=5", "//ratelimit:period=1 threshold=5 onerror=local"},
		{"//ratelimit:keyhash=true key=k emptykey=deny period=1 threshold=5", "//ratelimit:period=1 threshold=5 key=k emptykey=deny keyhash=true"},
		{"//ratelimit:period=1 threshold=5 cost=2 algorithm=leaky_bucket capacity=9 wait=0 shadow=false",
			"//ratelimit:period=1 threshold=5 cost=2 algorithm=leaky_bucket capacity=9"},
	}
	pos := token.Position{Filename: "a.go", Line: 1, Column: 1}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			d, errs := ParseComment(pos, tt.line)
			require.Empty(t, errs)
			assert.Equal(t, tt.want, d.String())

			again, errs := ParseComment(pos, d.String())
			require.Empty(t, errs)
			assert.Equal(t, reparsedValues(d), reparsedValues(again))
		})
	}
}

func TestFormatValue(t *testing.T) {
	assert.Equal(t, "abc", formatValue("abc"))
	assert.Equal(t, `""`, formatValue(""))
	assert.Equal(t, `"a b"`, formatValue("a b"))
	assert.Equal(t, `"a\tb"`, formatValue("a\tb"))
	assert.Equal(t, `"\"a"`, formatValue(`"a`))
	assert.Equal(t, `a"b`, formatValue(`a"b`))
	assert.Equal(t, `"a\nb"`, formatValue("a\nb"))
}

// path returns the expression of a path of identifiers that starts at
// offset of the value.
func path(offset int, names ...string) *Expr {
	e := &Expr{}
	for _, n := range names {
		e.Parts = append(e.Parts, Part{Name: n, Offset: offset})
		offset += len(n) + 1
	}
	return e
}
