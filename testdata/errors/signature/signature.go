// Package signature is a diagnostics test of ratelimitgen: directives that
// parse but do not fit the methods they are on.
package signature

import (
	"context"
	"io"

	"github.com/ratelimitgen/ratelimitgen/testdata/errors/signature/sealed"
)

// Req is what keys are read from.
type Req struct {
	Flag bool
	ID   string
}

// Lookup takes an argument, so it cannot be part of a key.
func (r *Req) Lookup(name string) string { return name }

// S has a mistake on every method.
type S interface {
	//ratelimit:period=1 threshold=1
	NoError() int
	//ratelimit:period=1 threshold=1
	NoResults()
	//ratelimit:period=1 threshold=1 key=missing
	MissingParam(id string) error
	//ratelimit:period=1 threshold=1 key=req.Nope
	MissingField(req *Req) error
	//ratelimit:period=1 threshold=1 key=req.Flag
	BadKeyType(req *Req) error
	//ratelimit:period=1 threshold=1 key=req.Lookup
	MethodWithArgs(req *Req) error
	//ratelimit:period=1 threshold=1 key=ids
	VariadicKey(ids ...string) error
	//ratelimit:period=1 threshold=5 cost=n
	CostNotInt(n string) error
	//ratelimit:period=1 threshold=5 cost=missing
	CostMissing(n int) error
	//ratelimit:period=1 threshold=2 key=a wait=1s
	//ratelimit:period=1m threshold=10 key=b wait=1000ms
	//ratelimit:period=1h threshold=100 wait=2s
	Disagree(a, b string) error
	//ratelimit:period=1 threshold=1 name=shared
	SharedA() error
	//ratelimit:period=1 threshold=2 name=shared
	SharedB() error
	//ratelimit:period=1 threshold=100
	//ratelimit:period=2 threshold=100
	//ratelimit:period=3 threshold=100
	//ratelimit:period=4 threshold=100
	//ratelimit:period=5 threshold=100
	//ratelimit:period=6 threshold=100
	//ratelimit:period=7 threshold=100
	//ratelimit:period=8 threshold=100
	//ratelimit:period=9 threshold=100
	//ratelimit:period=10 threshold=100
	//ratelimit:period=11 threshold=100
	//ratelimit:period=12 threshold=100
	//ratelimit:period=13 threshold=100
	//ratelimit:period=14 threshold=100
	//ratelimit:period=15 threshold=100
	//ratelimit:period=16 threshold=100
	//ratelimit:period=17 threshold=100
	TooManyLimits() error
}

// Constraint has a type set, so no value has it as its type.
type Constraint interface {
	~int
	//ratelimit:period=1 threshold=1
	M() error
}

// NoMethods has nothing to limit.
//
//ratelimit:period=1 threshold=1
type NoMethods struct{}

// Typed has a directive whose key only some of its methods have.
//
//ratelimit:period=1m threshold=60 key=ctx
type Typed interface {
	io.Closer
	Ping(ctx context.Context) error
}

// Embeds can only be implemented outside package sealed by embedding an
// implementation, so its decorator embeds it: a method named like the
// type would clash with that field.
type Embeds interface {
	sealed.Sealed
	//ratelimit:period=1 threshold=1
	Embeds() error
}

// Empty has nothing to limit.
//
//ratelimit:period=1 threshold=1
type Empty interface{}

// Overridden has a type-level limit, a default for the methods without
// directives of their own, but every method has some: it limits nothing.
//
//ratelimit:period=1m threshold=100
type Overridden interface {
	//ratelimit:period=1 threshold=1
	Get(ctx context.Context) error
	//ratelimit:period=1 threshold=2
	Put(ctx context.Context) error
}

// Counter's type-level limit applies to Reset, which has no directive.
//
//ratelimit:period=1m threshold=100
type Counter struct{}

// Add has its own limit.
//
//ratelimit:period=1 threshold=1
func (*Counter) Add(ctx context.Context) error { return nil }

// Reset is limited by the type's directive.
func (*Counter) Reset(ctx context.Context) error { return nil }

// AllOwn's type-level limit limits none of its methods.
//
//ratelimit:period=1m threshold=100
type AllOwn struct{}

// Add has its own limit.
//
//ratelimit:period=1 threshold=1
func (*AllOwn) Add(ctx context.Context) error { return nil }
