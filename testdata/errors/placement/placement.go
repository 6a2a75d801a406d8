// Package placement is a diagnostics test of ratelimitgen: directives in
// every place where they do not belong.
//
//ratelimit:period=1 threshold=1
package placement

//ratelimit:period=1 threshold=1
func F() error { return nil }

//ratelimit:period=1 threshold=1
var V = 1

//ratelimit:period=1 threshold=1
const K = 1

// S has a field with a directive.
type S struct {
	//ratelimit:period=1 threshold=1
	Field int
}

// A is an alias.
//
//ratelimit:period=1 threshold=1
type A = S

// A grouped declaration's doc comment belongs to no single type.
//
//ratelimit:period=1 threshold=1
type (
	B interface{ M() error }
	C interface{ M() error }
)

// E has a directive on an embedded element and one after a method.
type E interface {
	//ratelimit:period=1 threshold=1
	B
	N() error //ratelimit:period=1 threshold=1
}

// G declares a local type.
func G() {
	//ratelimit:period=1 threshold=1
	type local interface{ M() error }
	var _ local
}

// Params has a function-typed field whose interface literal holds a
// directive.
type Params struct {
	Fn func(interface {
		//ratelimit:period=1 threshold=1
		M() error
	})
}
