// Package olderversion has a generated file of an older version of
// ratelimitgen, which called Rule.Check with the key before the cost: it
// does not compile against this runtime, and the analyzer, run on its own
// (ratelimitvet ./...), reports it stale with the fix. Its name starts
// with "_", so that ./... passes it by.
package olderversion

import "context"

// Store is decorated.
type Store interface {
	//ratelimit:period=30 threshold=2 key=id
	Get(ctx context.Context, id string) (string, error)
}
