// Package typeerror is a diagnostics test of ratelimitgen: every type error
// of a package with directives is reported at its position (a decorated
// signature that refers to nothing, a method declared twice, an import
// only a directive uses), but for the uses of what generated files
// declare, this package's or another's, which the generator does not load.
package typeerror

import (
	"context"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/testdata/basic"
)

// S refers to a type that does not exist.
type S interface {
	//ratelimit:period=1 threshold=1
	Get(id Missing) error
}

// Server is as another package generated it.
type Server interface {
	Items(ctx context.Context, n int) error
}

// Dup redeclares a method of Server with another signature, as after a
// change to the .proto file Server is generated from.
type Dup interface {
	Server
	//ratelimit:period=1 threshold=1
	Items(ctx context.Context, s string) error
}

// Keyed calls a function of a package that nothing else in the file uses.
type Keyed interface {
	//ratelimit:period=1 threshold=1 key=strings.ToLower(s)
	Get(s string) error
}

// Fine is decorated, and code below uses its decorator and its rule, and
// the decorator of another package.
type Fine interface {
	//ratelimit:period=1 threshold=1
	Do() error
}

var (
	_ = NewFineWithRateLimit
	_ = fineDoRateLimit
	_ = RateLimitRules
	_ = basic.NewStoreWithRateLimit
)
