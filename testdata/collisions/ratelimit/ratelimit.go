// Package ratelimit is a helper of the collisions golden test: a package
// whose name collides with the runtime's.
package ratelimit

// Config is a struct whose zero value the generated code must spell.
type Config struct {
	Burst int
}

// Limiter is an interface named like the runtime's.
type Limiter interface {
	Limit() int
}
