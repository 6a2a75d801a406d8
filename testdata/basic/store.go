// Package basic is a golden test of ratelimitgen: an interface with limited
// and unlimited methods.
package basic

import "context"

// Item is what a Store holds.
type Item struct {
	ID    string
	Owner int64
}

// Store keeps items.
type Store interface {
	// Get returns the item with the given id.
	//ratelimit:period=30 threshold=2 key=id
	Get(ctx context.Context, id string) (*Item, error)
	// Put stores an item: at most 10 a second and 100 a minute per owner.
	//ratelimit:period=1 threshold=10 key=item.Owner
	//ratelimit:period=1m threshold=100 key=item.Owner
	Put(ctx context.Context, item Item) error
	// Count is limited without a context.
	//ratelimit:period=500ms threshold=3
	Count(prefix string) (int, error)
	// List is not limited.
	List(ctx context.Context) ([]Item, error)
	// Close is not limited.
	Close() error
}
