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

// Item has a field and a method.
type Item struct{ Name string }

func (i *Item) ID(n int) string { return "" }

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
	// Go spellings the grammar has, used wrongly: each message says what
	// is accepted.
	//ratelimit:period=1 threshold=1 key=it.ID(n)
	O(it *Item, n int) error
	//ratelimit:period=1 threshold=1 key=it.ID(1)
	N2(it *Item) error
	//ratelimit:period=1 threshold=1 key=it.Name()
	P(it *Item) error
	//ratelimit:period=1 threshold=1 cost=len(ctx)
	Q(ctx context.Context) error
	//ratelimit:period=1 threshold=1 cost="len(s, s)"
	R(s string) error
	//ratelimit:period=1 threshold=1 key=name
	T(ctx context.Context) error
	//ratelimit:period=1 threshold=1 key=strings
	U(s string) error
	//ratelimit:period=1 threshold=1 key=it(ctx)
	V(ctx context.Context, it *Item) error
	//ratelimit:period=1 threshold=1 keyhash=true
	W(ctx context.Context) error
	// Each line has its own key: a mistake in the second line's is
	// reported there, and a line without key= has no key to qualify.
	//ratelimit:period=1 threshold=1 key=user
	//ratelimit:period=1h threshold=100 key=tenant
	X(ctx context.Context, user string) error
	//ratelimit:period=1 threshold=1 key=user emptykey=deny
	//ratelimit:period=1h threshold=100 emptykey=deny keyhash=true
	Y(ctx context.Context, user string) error
	// Lines with the same key agree on what is done with it.
	//ratelimit:period=1 threshold=1 key=user keyhash=true emptykey=deny
	//ratelimit:period=1h threshold=100 key=user
	Z(ctx context.Context, user string) error
}
