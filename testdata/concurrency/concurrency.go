// Package concurrency is a golden test of ratelimitgen: concurrency lines
// limit the calls in flight, alone and with rate lines and settle=.
package concurrency

import "context"

// Exporter runs exports.
type Exporter interface {
	// Export runs at most 2 exports per tenant at once.
	//ratelimit:concurrency=2 key=tenant lease=30s
	Export(ctx context.Context, tenant string) error
	// Query runs at most 3 queries at once, and 100 per minute, waiting up
	// to a second for a slot.
	//ratelimit:period=1m threshold=100
	//ratelimit:concurrency=3 wait=1s
	Query(ctx context.Context, sql string) (rows int, err error)
	// Scan reserves 10 units, settles at the rows scanned, and runs one
	// scan at a time.
	//ratelimit:period=1 threshold=50 cost=10 settle=rows
	//ratelimit:concurrency=1
	Scan(ctx context.Context) (rows int64, err error)
}
