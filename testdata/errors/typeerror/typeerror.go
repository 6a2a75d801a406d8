// Package typeerror is a diagnostics test of ratelimitgen: a decorated
// signature that does not type-check is reported; other type errors (such
// as uses of generated code that is not there yet) are not.
package typeerror

// S refers to a type that does not exist.
type S interface {
	//ratelimit:period=1 threshold=1
	Get(id Missing) error
}

// Fine is decorated, and code below uses its decorator.
type Fine interface {
	//ratelimit:period=1 threshold=1
	Do() error
}

var _ = NewFineWithRateLimit
