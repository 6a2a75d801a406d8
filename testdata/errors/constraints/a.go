// Package constraints is a diagnostics test of ratelimitgen: decorated
// types declared under different build constraints cannot share one
// generated file.
package constraints

// A is built everywhere.
type A interface {
	//ratelimit:period=1 threshold=1
	Do() error
}
