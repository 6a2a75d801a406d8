package templates

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/ratelimitgen/ratelimitgen/model"
)

func TestAssumedPackageName(t *testing.T) {
	for in, want := range map[string]string{
		"context": "context", "github.com/redis/go-redis/v9": "redis", "gopkg.in/yaml.v3": "yaml",
		"github.com/ratelimitgen/ratelimitgen/runtime": "runtime", "example.com/go-kit": "kit",
	} {
		if got := assumedPackageName(in); got != want {
			t.Errorf("assumedPackageName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNamesAreFreshAndAvoidTheScope(t *testing.T) {
	n := newNames(func(s string) bool { return s == "next" })
	n.reserve("d")
	got := []string{n.fresh("d"), n.fresh("d"), n.first("next", "wrapped"), n.fresh("next"), n.first("type", "func")}
	want := []string{"d1", "d2", "wrapped", "next1", "type1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestDurationsAreWrittenInTheirLargestExactUnit(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:        "30 * time.Second",
		time.Minute:             "time.Minute",
		90 * time.Second:        "90 * time.Second",
		500 * time.Millisecond:  "500 * time.Millisecond",
		1500 * time.Microsecond: "1500 * time.Microsecond",
		2 * time.Hour:           "2 * time.Hour",
		90 * time.Minute:        "90 * time.Minute",
		3:                       "3 * time.Nanosecond",
	} {
		if got := fmt.Sprintf("%#v", duration(d)); got != want {
			t.Errorf("duration(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc ddd\n\neee", 8)
	want := []string{"aaa bbb", "ccc ddd", "", "eee"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// check type-checks src as package p (path example.com/p) and returns it.
func check(t *testing.T, src string) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("example.com/p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

// TestTypesRoundTrip renders the type of every variable in a package and
// compares it with how it is written.
func TestTypesRoundTrip(t *testing.T) {
	src := `package p

import (
	"context"
	"io"
	"unsafe"
)

type Pair[K comparable, V any] struct{ K K; V V }

var (
	a chan (<-chan int)
	b chan<- <-chan int
	c <-chan []*[4]map[string]func(context.Context, ...any) (int, error)
	d struct {
		A int ` + "`json:\"a\"`" + `
		io.Reader
		*Pair[string, int]
	}
	e interface {
		io.Closer
		Do(ctx context.Context) (n int, err error)
	}
	f unsafe.Pointer
	g func(string, []byte) bool
	h Pair[Pair[int, string], []error]
	i byte
	j rune
	k any
	l struct{ N int }
	m interface{}
)
`
	want := map[string]string{
		"a": "chan (<-chan int)",
		"b": "chan<- <-chan int",
		"c": "<-chan []*[4]map[string]func(context.Context, ...any) (int, error)",
		"d": "struct {\n\tA int `json:\"a\"`\n\tio.Reader\n\t*Pair[string, int]\n}",
		"e": "interface {\n\tio.Closer\n\tDo(ctx context.Context) (n int, err error)\n}",
		"l": "struct{ N int }",
		"m": "interface{}",
		"f": "unsafe.Pointer",
		"g": "func(string, []byte) bool",
		"h": "Pair[Pair[int, string], []error]",
		"i": "byte",
		"j": "rune",
		"k": "any",
	}
	pkg := check(t, src)
	r := &typeNames{pkgPath: "example.com/p", imports: map[string]string{}}
	for name, w := range want {
		f := jen.NewFilePathName("example.com/p", "p")
		f.Var().Id("_").Add(r.typ(pkg.Scope().Lookup(name).Type()))
		got := f.GoString()
		got = got[strings.Index(got, "var _ ")+len("var _ "):]
		if got = strings.TrimSpace(got); got != w {
			t.Errorf("%s: got\n%s\nwant\n%s", name, got, w)
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
}

func TestUnexportedForeignTypesCannotBeNamed(t *testing.T) {
	pkg := check(t, "package p\n\nimport \"net/http\"\n\nvar v = http.NoBody\n")
	r := &typeNames{pkgPath: "example.com/other"}
	r.typ(pkg.Scope().Lookup("v").Type())
	if r.err == nil || !strings.Contains(r.err.Error(), "net/http.noBody is not exported") {
		t.Errorf("err = %v, want one about net/http.noBody", r.err)
	}
}

func TestLimitValueWritesNonZeroFieldsOnly(t *testing.T) {
	render := func(l model.Limit) string {
		return fmt.Sprintf("%#v", jen.Var().Id("_").Op("=").Id("L").Add(limitValue(l)))
	}
	if got, want := render(model.Limit{Period: time.Second, Threshold: 10}), "var _ = L{Period: time.Second, Threshold: 10}"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	got := render(model.Limit{Period: time.Minute, Threshold: 1, Algorithm: "token_bucket", Burst: 20, Capacity: 50})
	for _, want := range []string{"Algorithm: runtime.TokenBucket", "Burst: 20", "Capacity: 50"} {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %s", got, want)
		}
	}
}

// TestKeyVariablesAreNamedAfterWhatTheySelect: the variable of a key of a
// rule with a key per line is named after the field, getter or function
// its expression ends with.
func TestKeyVariablesAreNamedAfterWhatTheySelect(t *testing.T) {
	for in, want := range map[string]string{
		"item.Owner": "ownerKey", "req.GetTenant()": "tenantKey", "req.GetOrder().GetTenant()": "tenantKey",
		"auth.Principal(ctx)": "principalKey", "tenant(ctx,req.Org)": "tenantKey", "req.Get()": "getKey",
		"req.User.ID": "idKey", "len(req.Skus)": "lenKey", "req.URL": "urlKey",
	} {
		if got := keyVarBase(in); got != want {
			t.Errorf("keyVarBase(%q) = %q, want %q", in, got, want)
		}
	}
}
