// Package pb is a helper of the foreign golden test: it has the shape of
// what protoc-gen-go-grpc generates (a server interface with an unexported
// method that only UnimplementedGreeterServer implements, a server stream,
// a client interface with variadic call options), without depending on
// grpc. testdata/grpc tests the real thing.
package pb

import "context"

// HelloRequest is a request.
type HelloRequest struct{ Name string }

// HelloReply is a reply.
type HelloReply struct{ Message string }

// ServerStreamingServer is the server side of a server stream, as in grpc.
type ServerStreamingServer[Res any] interface {
	Send(*Res) error
	Context() context.Context
}

// GreeterServer is the server API, as protoc-gen-go-grpc writes it.
type GreeterServer interface {
	SayHello(context.Context, *HelloRequest) (*HelloReply, error)
	StreamHellos(*HelloRequest, ServerStreamingServer[HelloReply]) error
	Ping(context.Context, *HelloRequest) (*HelloReply, error)
	mustEmbedUnimplementedGreeterServer()
}

// UnimplementedGreeterServer must be embedded by implementations.
type UnimplementedGreeterServer struct{}

func (UnimplementedGreeterServer) mustEmbedUnimplementedGreeterServer() {}

// CallOption configures a call, as grpc.CallOption does.
type CallOption interface{ apply() }

// GreeterClient is the client API, with variadic call options.
type GreeterClient interface {
	SayHello(ctx context.Context, in *HelloRequest, opts ...CallOption) (*HelloReply, error)
	Ping(ctx context.Context, in *HelloRequest, opts ...CallOption) (*HelloReply, error)
}

// EmptyCallOption is a CallOption that does nothing, as in grpc.
type EmptyCallOption struct{}

func (EmptyCallOption) apply() {}
