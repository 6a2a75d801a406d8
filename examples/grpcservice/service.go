package main

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	pb "github.com/ratelimitgen/ratelimitgen/examples/grpcservice/quotepb"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

//go:generate go tool ratelimitgen

// LimitedQuotes is the protoc-generated pb.QuotesServer with limits per
// caller: it embeds the server interface and redeclares the methods to
// limit, keyed by the principal the authentication interceptor put in the
// call's context. Each limit has a short name=, the QuotaFailure subject a
// denied client sees.
type LimitedQuotes interface {
	pb.QuotesServer
	//ratelimit:period=10s threshold=3 key=principal(ctx) emptykey=deny name=quotes.get
	Get(ctx context.Context, req *pb.GetRequest) (*pb.Quote, error)
	//ratelimit:period=1m threshold=1 key=principal(stream.Context) emptykey=deny name=quotes.list
	List(req *pb.ListRequest, stream grpc.ServerStreamingServer[pb.Quote]) error
}

// newServer returns a gRPC server of the Quotes service whose calls are
// limited per caller by limiter. The ratelimitgrpc interceptors, outermost,
// turn the decorator's denials into ResourceExhausted statuses; the
// authentication interceptors, inside them, give each call its principal.
func newServer(limiter ratelimit.Limiter) *grpc.Server {
	s := grpc.NewServer(
		grpc.ChainUnaryInterceptor(ratelimitgrpc.UnaryServerInterceptor(), authenticateUnary),
		grpc.ChainStreamInterceptor(ratelimitgrpc.StreamServerInterceptor(), authenticateStream),
	)
	pb.RegisterQuotesServer(s, NewLimitedQuotesWithRateLimit(quotes{}, limiter))
	return s
}

// UserHeader is the metadata field that names the caller. It stands in for
// the credentials (a bearer token, a client certificate) a real service
// would verify before trusting the name.
const UserHeader = "x-user"

// principalKey is the context key of the caller's principal.
type principalKey struct{}

// principal returns the caller that authenticate put in ctx, or "".
func principal(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// authenticate returns ctx with the caller named by its incoming metadata;
// a call that names nobody fails with codes.Unauthenticated.
func authenticate(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	users := md.Get(UserHeader)
	if len(users) == 0 || users[0] == "" {
		return nil, status.Error(codes.Unauthenticated, "missing "+UserHeader+" metadata")
	}
	return context.WithValue(ctx, principalKey{}, users[0]), nil
}

// authenticateUnary runs a unary handler with the caller's principal.
func authenticateUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := authenticate(ctx)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// authenticateStream runs a stream handler with the caller's principal in
// the stream's context.
func authenticateStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := authenticate(ss.Context())
	if err != nil {
		return err
	}
	return handler(srv, &authenticatedStream{ServerStream: ss, ctx: ctx})
}

// authenticatedStream is a server stream whose context holds the caller.
type authenticatedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authenticatedStream) Context() context.Context { return s.ctx }

// quotes implements pb.QuotesServer.
type quotes struct {
	pb.UnimplementedQuotesServer
}

// collection is what the service quotes.
var collection = []*pb.Quote{
	{Text: "Clear is better than clever.", Author: "Rob Pike"},
	{Text: "A little copying is better than a little dependency.", Author: "Rob Pike"},
	{Text: "Don't communicate by sharing memory, share memory by communicating.", Author: "Rob Pike"},
}

// Get returns the first quotation.
func (quotes) Get(context.Context, *pb.GetRequest) (*pb.Quote, error) {
	return collection[0], nil
}

// List streams req.Count quotations, cycling through the collection.
func (quotes) List(req *pb.ListRequest, stream grpc.ServerStreamingServer[pb.Quote]) error {
	for i := range int(req.GetCount()) {
		if err := stream.Send(collection[i%len(collection)]); err != nil {
			return err
		}
	}
	return nil
}
