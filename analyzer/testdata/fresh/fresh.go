// Package fresh has up-to-date generated code: nothing is reported.
package fresh

import "context"

// Store is decorated.
type Store interface {
	//ratelimit:period=30 threshold=2 key=id
	Get(ctx context.Context, id string) (string, error)
	Close() error
}
