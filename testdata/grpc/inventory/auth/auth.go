// Package auth finds the caller of a gRPC call by its API key, failing
// with the gRPC status a caller without one should see.
package auth

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Header is the metadata field of the caller's API key.
const Header = "x-api-key"

// Principal returns the caller named by the call's API key, or an
// Unauthenticated status when it has none.
func Principal(ctx context.Context) (string, error) {
	if vs := metadata.ValueFromIncomingContext(ctx, Header); len(vs) > 0 && vs[0] != "" {
		return "key:" + vs[0], nil
	}
	return "", status.Error(codes.Unauthenticated, "missing "+Header)
}
