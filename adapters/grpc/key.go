package ratelimitgrpc

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// KeyFunc returns the per-call key of a gRPC call from its context, such
// as the client's address, an API key or a principal an authentication
// interceptor stored; see [ratelimit.Request.Key]. An error fails the call
// uncharged, as a generated decorator's key function's does: an error
// wrapping [ratelimit.ErrEmptyKey] with the missing-key status
// (codes.InvalidArgument unless [MissingKeyCode] sets another), a gRPC
// status (such as status.Error(codes.Unauthenticated, "missing
// x-api-key")) as it is, and any other error with codes.InvalidArgument,
// without the error's text.
type KeyFunc func(ctx context.Context) (string, error)

// errNoPeer is returned by PeerIP for a context without a peer.
var errNoPeer = fmt.Errorf("ratelimitgrpc: no peer in the context: %w", ratelimit.ErrEmptyKey)

// PeerIP returns a KeyFunc that keys calls by the IP address of the peer
// that made them (its address without the port; the whole address for a
// peer that is not TCP, such as a Unix socket). It believes no proxy: put
// the key a trusted proxy sends in metadata and read it with [Metadata].
func PeerIP() KeyFunc {
	return func(ctx context.Context) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", errNoPeer
		}
		if a, ok := p.Addr.(*net.TCPAddr); ok {
			return a.AddrPort().Addr().Unmap().WithZone("").String(), nil
		}
		return p.Addr.String(), nil
	}
}

// Metadata returns a KeyFunc that keys calls by the first value of the
// incoming metadata field name (such as "x-api-key"); a call without it, or
// with an empty value, has no key (the error wraps [ratelimit.ErrEmptyKey]).
// The value comes from the client as it
// is: use it only for keys the server checks, and mind that each distinct
// value is one more key to keep.
func Metadata(name string) KeyFunc {
	return func(ctx context.Context) (string, error) {
		if vs := metadata.ValueFromIncomingContext(ctx, name); len(vs) > 0 && vs[0] != "" {
			return vs[0], nil
		}
		return "", fmt.Errorf("ratelimitgrpc: no %s metadata: %w", name, ratelimit.ErrEmptyKey)
	}
}
