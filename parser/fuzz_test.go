package parser

import (
	"go/token"
	"reflect"
	"strings"
	"testing"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
)

// FuzzParseComment checks that ParseComment never panics, that what it
// accepts is a limit the runtime decides, that every error points into the
// comment, and that an accepted directive survives rendering and parsing
// again.
func FuzzParseComment(f *testing.F) {
	for _, seed := range []string{
		"//ratelimit:period=30 threshold=2",
		"//ratelimit:period=1m30s threshold=100 key=req.User.ID name=search/v2",
		"//ratelimit:\tperiod=\"500ms\"\tthreshold=\"7\" ",
		"//ratelimit:period=1 threshold=9 cost=n algorithm=token_bucket burst=20 wait=250ms onerror=deny shadow=true",
		"//ratelimit:period=1s threshold=1000 algorithm=fixed_window prefetch=100ms",
		"//ratelimit:period=1m threshold=60 key=req.Org cooldown=true",
		"//ratelimit:period=1 threshold=9 cost=3 algorithm=leaky_bucket capacity=5 wait=0 shadow=false",
		"//ratelimit:period=1 threshold=9 onerror=local",
		"//ratelimit:period=1500us threshold=67108864 algorithm=sliding_window",
		"//ratelimit:period=2ms threshold=67108864 algorithm=fixed_window",
		"//ratelimit:period=1 threshold=1125899906842624",
		"//ratelimit:period=1 threshold=2 cost=9 algorithm=gcra burst=1125899906842623",
		"//ratelimit:decorator=LimitedStore",
		`//ratelimit:period=1 threshold=9 key="auth.Principal(ctx, req.ID)" cost=w(n) emptykey=deny`,
		`//ratelimit:period=1 threshold=9 key=req.GetOrder().GetTenant() cost="len( req.GetSkus() )"`,
		"//ratelimit:period=1 threshold=9 key=f(g(h(x)).Y)",
		"//ratelimit:period=1 threshold=9 key=k keyhash=true",
		"//ratelimit:period=1m threshold=9000 cost=req.MaxTokens settle=resp.Usage.TotalTokens",
		`//ratelimit:period=1 threshold=9 settle="len( items )"`,
		"//ratelimit:period=1 threshold=9 settle=-3",
		"//ratelimit:period=1 threshold=9 settle=0 refund=success",
		"//ratelimit:period=1 threshold=9 refund=errs.Retryable(err)",
		"//ratelimit:period=1 threshold=9 refund=a.b(err).c()",
		"//ratelimit:concurrency=10 key=tenant lease=30s wait=1s",
		"//ratelimit:concurrency=0 period=1 lease=1us",
		"//ratelimit:decorator=Limited period=1 threshold=1",
		`//ratelimit:period=1 threshold=1 name="a\x2fb"`,
		"//ratelimit:",
		"//ratelimit:period=3x threshhold=0 key=_ burst=1",
		`//ratelimit:period=1 threshold=1 name="abc`,
		"//ratelimit:=5 period= threshold",
		"// ratelimit:period=1 threshold=1",
		"//RateLimit period=1",
		"/*ratelimit:period=1 threshold=1*/",
		"// an ordinary comment",
		"//ratelimt:period=1 threshold=1",
		"//rate-limit=period=1",
		"/* RateLimits period=1 */",
		"//ratelimit:period=month threshold=10000 tz=Europe/Paris key=apiKey",
		"//ratelimit:period=day threshold=5 algorithm=fixed_window",
		"//ratelimit:period=week tz=America/New_York threshold=1 algorithm=gcra",
		"//ratelimit:period=year tz=Mars/Olympus threshold=1",
		"//ratelimit:period=30 threshold=1 tz=UTC",
		"//ratelimit:period=monthly threshold=1 tz=Local",
	} {
		f.Add(seed)
	}
	pos := token.Position{Filename: "f.go", Offset: 100, Line: 7, Column: 3}
	f.Fuzz(func(t *testing.T, text string) {
		d, errs := ParseComment(pos, text)
		if d != nil && !strings.HasPrefix(text, Prefix) {
			t.Fatalf("directive from a comment without the prefix: %q", text)
		}
		for _, e := range errs {
			checkPosition(t, pos, text, e.Pos)
			if e.Msg == "" {
				t.Errorf("empty message")
			}
		}
		if d == nil || len(errs) > 0 {
			return
		}
		if d.Decorator != "" {
			if !reflect.DeepEqual(*d, Directive{Pos: d.Pos, Decorator: d.Decorator, Args: d.Args}) || len(d.Args) != 1 {
				t.Fatalf("accepted %q: decorator= with more: %+v", text, d)
			}
		} else if d.Concurrency != 0 {
			if err := limitfacts.CheckConcurrency(d.Concurrency, d.Lease); err != nil {
				t.Fatalf("accepted %q, which the runtime cannot hold: %v", text, err)
			}
		} else if err := (limitfacts.Limit{Period: d.Period, Calendar: d.Calendar, TZ: d.TZ, Threshold: d.Threshold, Algorithm: d.Algorithm, Burst: d.Burst, Capacity: d.Capacity}).Check(); err != nil {
			t.Fatalf("accepted %q, which the runtime cannot decide: %v", text, err)
		}
		for _, a := range d.Args {
			checkPosition(t, pos, text, a.NamePos)
			checkPosition(t, pos, text, a.ValuePos)
		}
		checkReparse(t, pos, d, d.String())
		checkReparse(t, pos, d, renderArgs(d.Args))
	})
}

// checkPosition fails unless p lies within the comment text at pos.
func checkPosition(t *testing.T, pos token.Position, text string, p token.Position) {
	t.Helper()
	i := p.Offset - pos.Offset
	if p.Filename != pos.Filename || p.Line != pos.Line || i < 0 || i >= max(len(text), 1) || p.Column != pos.Column+i {
		t.Fatalf("position %v (offset %d) outside comment %q at %v", p, p.Offset, text, pos)
	}
}

// checkReparse parses text and fails unless it gives d's values.
func checkReparse(t *testing.T, pos token.Position, d *Directive, text string) {
	t.Helper()
	again, errs := ParseComment(pos, text)
	if len(errs) > 0 || again == nil {
		t.Fatalf("reparsing %q: %v", text, errs)
	}
	if want, got := reparsedValues(d), reparsedValues(again); !reflect.DeepEqual(want, got) {
		t.Fatalf("reparsing %q:\n got %+v\nwant %+v", text, got, want)
	}
}

// renderArgs renders args as a directive, in their order, quoting values
// as needed.
func renderArgs(args []Arg) string {
	var b strings.Builder
	b.WriteString(Prefix)
	for _, a := range args {
		b.WriteString(" " + a.Name + "=" + formatValue(a.Value))
	}
	return b.String()
}
