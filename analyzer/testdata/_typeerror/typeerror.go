// Package typeerror does not compile: after a change to the interface it
// embeds, it declares a method twice.
package typeerror

import "context"

// Server is what another package generated.
type Server interface {
	GetItems(ctx context.Context, n int) (string, error)
}

// Limited redeclares GetItems with another signature.
type Limited interface {
	Server
	//ratelimit:period=1 threshold=1
	GetItems(ctx context.Context, s string) (string, error)
}
