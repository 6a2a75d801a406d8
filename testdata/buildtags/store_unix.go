//go:build linux || darwin

package buildtags

import "context"

// Store is only built on Unix systems; so is its decorator.
type Store interface {
	//ratelimit:period=1 threshold=1
	Get(ctx context.Context) error
}

// Other is in the same file, under the same constraint.
type Other interface {
	//ratelimit:period=1 threshold=1
	Do() error
}
