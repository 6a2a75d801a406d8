// Package renamed uses a decorator that its stale generated file declares
// but its directives no longer do: the package compiles until it is
// generated again.
package renamed

import "context"

// Store is decorated.
//
//ratelimit:decorator=LimitedStore
type Store interface {
	//ratelimit:period=30 threshold=3 key=id
	Get(ctx context.Context, id string) (string, error)
}

var _ = NewStoreWithRateLimit // want `undefined: NewStoreWithRateLimit`
