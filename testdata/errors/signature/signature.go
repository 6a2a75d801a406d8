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
	Disagree(a, b string) error
	//ratelimit:period=1 threshold=1 name=shared
	SharedA() error
	//ratelimit:period=1 threshold=2 name=shared
	SharedB() error
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
