// Package stale has generated code from an older directive: the
// diagnostic is at the directive whose code differs.
package stale

import "context"

// Store is decorated.
type Store interface {
	//ratelimit:period=30 threshold=2 key=id
	Get(ctx context.Context, id string) (string, error)
	// The code of Put's limit differs; Get's is the same.
	// want +1 `ratelimit_gen.go is stale: its code for Store.Put differs from this directive; run go generate \(ratelimitgen\)`
	//ratelimit:period=30 threshold=3 key=id
	Put(ctx context.Context, id string) error
	Close() error
}
