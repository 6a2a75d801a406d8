// Package embedded is a golden test of ratelimitgen: interfaces that embed
// interfaces from this package and from others, with a directive on the
// type that applies to every method without one of its own.
package embedded

import (
	"context"
	"io"

	"github.com/ratelimitgen/ratelimitgen/testdata/embedded/remote"
)

// Reader has a limited method of its own.
type Reader interface {
	//ratelimit:period=1 threshold=5
	Read(p []byte) (int, error)
}

// Client embeds everything. Read keeps Reader's limit (its own directive,
// named after Reader); Ping has its own; every other method gets the
// type's.
//
//ratelimit:period=1m threshold=60
type Client interface {
	io.Closer
	remote.Fetcher
	remote.Getter[string]
	Reader
	// Ping has a directive of its own.
	//ratelimit:period=1 threshold=1
	Ping(ctx context.Context) error
}
