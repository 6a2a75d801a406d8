// Package foreign is a golden test of ratelimitgen: limiting interfaces
// this package does not own. A local interface embeds the foreign one and
// redeclares the methods to limit, with their directives.
package foreign

import (
	"context"

	"github.com/ratelimitgen/ratelimitgen/testdata/foreign/pb"
)

// LimitedGreeter limits a GreeterServer, whose unexported method only the
// wrapped value implements: its decorator embeds it. StreamHellos has no
// context.Context, so the limiter gets its stream's context.
type LimitedGreeter interface {
	pb.GreeterServer
	//ratelimit:period=1m threshold=2 key=req.Name
	SayHello(ctx context.Context, req *pb.HelloRequest) (*pb.HelloReply, error)
	//ratelimit:period=1m threshold=1 wait=1m
	StreamHellos(req *pb.HelloRequest, stream pb.ServerStreamingServer[pb.HelloReply]) error
}

// LimitedClient limits a client interface with variadic call options.
type LimitedClient interface {
	pb.GreeterClient
	//ratelimit:period=1m threshold=1
	SayHello(ctx context.Context, in *pb.HelloRequest, opts ...pb.CallOption) (*pb.HelloReply, error)
}
