// Package stale has generated code from an older directive.
package stale

import "context"

// Store is decorated.
type Store interface {
	// want +1 `ratelimit_gen.go is stale: run go generate \(ratelimitgen\)`
	//ratelimit:period=30 threshold=3 key=id
	Get(ctx context.Context, id string) (string, error)
	Close() error
}
