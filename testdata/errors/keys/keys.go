// Package keys is a diagnostics test of ratelimitgen: keys and costs
// computed by functions are type-checked at generate time.
package keys

import (
	"context"
	"strings"
)

func generic[T any](t T) string              { return "" }
func variadic(ctx ...context.Context) string { return "" }
func three(ctx context.Context) (string, string, error) {
	return "", "", nil
}
func notError(ctx context.Context) (string, int) { return "", 0 }
func wants(s string) string                      { return s }
func structure(ctx context.Context) struct{}     { return struct{}{} }
func name(ctx context.Context) string            { return "" }

// S has keys and costs that do not type-check.
type S interface {
	//ratelimit:period=1 threshold=1 key=nope(ctx)
	A(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=auth.Principal(ctx)
	B(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=strings.Repeat(s)
	C(s string) error
	//ratelimit:period=1 threshold=1 key=strings.toLower(s)
	D(s string) error
	//ratelimit:period=1 threshold=1 key=generic(ctx)
	E(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=variadic(ctx)
	F(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=three(ctx)
	G(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=notError(ctx)
	H(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=wants(ctx)
	I(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=structure(ctx)
	J(ctx context.Context) error
	//ratelimit:period=1 threshold=1 cost=name(ctx)
	K(ctx context.Context) error
	//ratelimit:period=1 threshold=1 emptykey=deny
	L(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key="wants(req.Nope)"
	M(req *strings.Builder) error
	//ratelimit:period=1 threshold=1 key=p
	N(p *[]string) error
}
