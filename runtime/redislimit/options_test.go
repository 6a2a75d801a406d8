package redislimit

import (
	"context"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestOwnOptionsDoNotCompileWithOtherLimiters type-checks programs that
// pass each option of this package to ratelimit.NewMemory, which does not
// honour them: each is a type error naming the option. The same options
// with the core's in one list for New type-check.
func TestOwnOptionsDoNotCompileWithOtherLimiters(t *testing.T) {
	check := newChecker(t)
	mixed := `redislimit.New(nil, redislimit.WithBatching(8), ratelimit.WithErrorPolicy(ratelimit.FailOpen), redislimit.WithPrefix("p:"))`
	require.NoError(t, check(mixed), "a list of both packages' options configures a Redis limiter")
	require.NoError(t, check(`ratelimit.NewMemory(ratelimit.WithMaxKeys(8))`))
	for _, opt := range []string{
		"redislimit.WithBatching(8)",
		"redislimit.WithDenyCache(8)",
		"redislimit.WithDenyHold(time.Second)",
		"redislimit.WithPrefix(\"p:\")",
		"redislimit.WithFallbackProcesses(2)",
		"redislimit.WithBreaker(1, time.Second, time.Second)",
	} {
		err := check(fmt.Sprintf("ratelimit.NewMemory(ratelimit.WithMaxKeys(8), %s)", opt))
		if assert.Error(t, err, opt) {
			assert.Contains(t, err.Error(), opt)
			assert.Contains(t, err.Error(), "as ratelimit.Option value")
		}
	}
}

// TestGuardsTakeTheirOwnOptionsOnly: guard.Wrap takes the options of
// package guard alone (the rest of its configuration is the backend's),
// and uses each: an option of redislimit or of ratelimit, which it would
// ignore, is a type error, and so is an option to a guard's own
// constructor (each guard but the lease guard, which takes none, is made
// by Wrap, which configures them all); New takes guard options in its one
// list.
func TestGuardsTakeTheirOwnOptionsOnly(t *testing.T) {
	check := newChecker(t)
	require.NoError(t, check(`guard.Wrap(ratelimit.NewMemory(), guard.WithDenyCache(8), guard.WithFallbackProcesses(2))`))
	require.NoError(t, check(`redislimit.New(nil, guard.WithDenyCache(8), redislimit.WithPrefix("p:"), ratelimit.WithMaxKeys(8))`))
	for _, expr := range []string{
		`guard.Wrap(ratelimit.NewMemory(), redislimit.WithPrefix("p:"))`,
		`guard.Wrap(ratelimit.NewMemory(), ratelimit.WithMaxKeys(8))`,
	} {
		err := check(expr)
		if assert.Error(t, err, expr) {
			assert.Contains(t, err.Error(), "guard.Option", expr)
		}
	}
	for _, expr := range []string{
		`guard.NewLeases(ratelimit.NewMemory(), guard.WithDenyCache(8))`,
		`guard.NewBreaker(ratelimit.NewMemory(), guard.WithDenyCache(8))`,
	} {
		assert.Error(t, check(expr), expr)
	}
	err := check(`ratelimit.NewMemory(guard.WithDenyCache(8))`)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "as ratelimit.Option value")
	}
}

// newChecker returns a function that type-checks a program whose main
// function evaluates expr, with packages ratelimit, redislimit and time
// imported, against the export data of this module's build.
func newChecker(t *testing.T) func(expr string) error {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	require.NoError(t, err, "go list -export")
	exports := map[string]string{}
	for _, line := range strings.Fields(string(out)) {
		path, file, _ := strings.Cut(line, "=")
		exports[path] = file
	}
	return func(expr string) error {
		fset := token.NewFileSet()
		src := `package misuse

import (
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var _, _, _, _ = time.Second, ratelimit.NewMemory, redislimit.New, guard.Wrap

func main() { _ = ` + expr + ` }
`
		f, err := parser.ParseFile(fset, "misuse.go", src, 0)
		require.NoError(t, err)
		lookup := func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) }
		conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
		_, err = conf.Check("misuse", fset, []*ast.File{f}, nil)
		return err
	}
}

// TestMixedOptionsConfigureTheLimiter makes a Limiter of one list of this
// package's options and the core's: each sets what it says.
func TestMixedOptionsConfigureTheLimiter(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	c := rdb(t)
	l := New(c, WithBatching(8), ratelimit.WithErrorPolicy(ratelimit.FailClosed), WithPrefix("mixed:"), WithDenyCache(0), ratelimit.WithMaxKeys(5))
	t.Cleanup(func() { l.Close() })
	assert.Equal(t, ratelimit.FailClosed, l.Config().ErrorPolicy)
	assert.Equal(t, 5, l.Config().MaxKeys)
	require.NotNil(t, l.batcher)
	assert.Equal(t, 8, l.batcher.max)

	lim := ratelimit.Limit{Period: time.Minute, Threshold: 1}
	_, err := l.Allow(ctx, ratelimit.Request{Name: "mixed", Key: "k", Limits: []ratelimit.Limit{lim}})
	require.NoError(t, err)
	keys, err := c.Keys(ctx, "mixed:*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "the limiter writes its keys under its prefix")

	down := New(newUnreachableClient(t), WithBatching(8), ratelimit.WithErrorPolicy(ratelimit.FailClosed))
	t.Cleanup(func() { down.Close() })
	rule := ratelimit.Rule{Name: "mixed", Limits: []ratelimit.Limit{lim}}
	err = rule.Check(ctx, down, 1, "k")
	assert.Error(t, err, "the core's error policy of the list fails the call closed")
}

// TestGuardsOfEveryOption: the guards the options turn on are the
// Limiter's Guards, the lease guard outermost, and guard.Of finds each of
// them through the Limiter.
func TestGuardsOfEveryOption(t *testing.T) {
	l := New(nil, WithDenyCache(8), WithBreaker(2, time.Second, time.Second))
	defer l.Close()
	require.Equal(t, []ratelimit.Limiter{l.leases, l.denials, l.breakers, l.fallback}, l.Guards())
	leases, ok := guard.Of[*guard.Leases](l)
	require.True(t, ok)
	require.Same(t, l.Leases(), leases)
	denials, ok := guard.Of[*guard.DenyCache](l)
	require.True(t, ok)
	require.Same(t, l.denials, denials)
	breakers, ok := guard.Of[*guard.Breaker](l)
	require.True(t, ok)
	require.Same(t, l.breakers, breakers)
	fallback, ok := guard.Of[*guard.Fallback](l)
	require.True(t, ok)
	require.Same(t, l.fallback, fallback)
}
