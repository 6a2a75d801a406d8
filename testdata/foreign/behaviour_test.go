package foreign

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/foreign/pb"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// greeter implements pb.GreeterServer the way protoc-gen-go-grpc asks:
// embedding UnimplementedGreeterServer.
type greeter struct {
	pb.UnimplementedGreeterServer
}

func (greeter) SayHello(_ context.Context, req *pb.HelloRequest) (*pb.HelloReply, error) {
	return &pb.HelloReply{Message: "hello " + req.Name}, nil
}

func (greeter) StreamHellos(req *pb.HelloRequest, s pb.ServerStreamingServer[pb.HelloReply]) error {
	return s.Send(&pb.HelloReply{Message: "hello " + req.Name})
}

func (greeter) Ping(context.Context, *pb.HelloRequest) (*pb.HelloReply, error) {
	return &pb.HelloReply{Message: "pong"}, nil
}

// The decorator is a pb.GreeterServer, so it can be registered.
var _ pb.GreeterServer = (*LimitedGreeterWithRateLimit)(nil)

func TestServerInterfaceWithAnUnexportedMethod(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		g := NewLimitedGreeterWithRateLimit(greeter{}, limiter)
		ctx := context.Background()
		for range 2 {
			reply, err := g.SayHello(ctx, &pb.HelloRequest{Name: "ann"})
			require.NoError(t, err)
			require.Equal(t, "hello ann", reply.Message)
		}
		reply, err := g.SayHello(ctx, &pb.HelloRequest{Name: "ann"})
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "ann", le.Key)
		require.Nil(t, reply)
		_, err = g.SayHello(ctx, &pb.HelloRequest{Name: "bob"})
		require.NoError(t, err, "keyed by req.Name")
		_, err = g.SayHello(ctx, nil)
		require.ErrorIs(t, err, ratelimit.ErrNilKey)
		for range 5 {
			reply, err := g.Ping(ctx, &pb.HelloRequest{})
			require.NoError(t, err, "Ping is promoted, not limited")
			require.Equal(t, "pong", reply.Message)
		}
	})
}

// stream is a server stream with its own context.
type stream struct {
	ctx  context.Context
	sent []*pb.HelloReply
}

func (s *stream) Send(r *pb.HelloReply) error {
	s.sent = append(s.sent, r)
	return nil
}

func (s *stream) Context() context.Context { return s.ctx }

// recorder is a Limiter that remembers the contexts it is asked with.
type recorder struct {
	ratelimit.Limiter
	mu   sync.Mutex
	ctxs []context.Context
}

func (r *recorder) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	r.record(ctx)
	return r.Limiter.Allow(ctx, req)
}

// Do records the context of a call's decision in its turn (a rule with
// wait=), and passes every operation on.
func (r *recorder) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	if op.Kind == ratelimit.OpTurn {
		r.record(ctx)
	}
	return r.Limiter.Do(ctx, op)
}

func (r *recorder) record(ctx context.Context) {
	r.mu.Lock()
	r.ctxs = append(r.ctxs, ctx)
	r.mu.Unlock()
}

type streamKey struct{}

// TestStreamIsLimitedWithItsContext checks that a method without a
// context.Context is limited with its stream's context: the limiter gets
// it, and a wait=1m ends at the stream's deadline instead of outliving it.
func TestStreamIsLimitedWithItsContext(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		rec := &recorder{Limiter: limiter}
		g := NewLimitedGreeterWithRateLimit(greeter{}, rec)
		s := &stream{ctx: context.WithValue(context.Background(), streamKey{}, "client")}
		require.NoError(t, g.StreamHellos(&pb.HelloRequest{Name: "ann"}, s))
		require.Len(t, s.sent, 1)
		require.Len(t, rec.ctxs, 1)
		require.Equal(t, "client", rec.ctxs[0].Value(streamKey{}), "the limiter gets the stream's context")

		// The next call would wait a minute for its turn; the stream's
		// deadline, far shorter, ends the wait at once.
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		defer cancel()
		err := g.StreamHellos(&pb.HelloRequest{Name: "ann"}, &stream{ctx: ctx})
		require.ErrorIs(t, err, ratelimit.ErrLimited)
	})
}

// client implements pb.GreeterClient and counts the options it gets.
type client struct{ opts int }

func (c *client) SayHello(_ context.Context, in *pb.HelloRequest, opts ...pb.CallOption) (*pb.HelloReply, error) {
	c.opts += len(opts)
	return &pb.HelloReply{Message: in.Name}, nil
}

func (c *client) Ping(_ context.Context, _ *pb.HelloRequest, opts ...pb.CallOption) (*pb.HelloReply, error) {
	c.opts += len(opts)
	return &pb.HelloReply{}, nil
}

func TestClientInterfaceWithVariadicOptions(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		c := &client{}
		var lc pb.GreeterClient = NewLimitedClientWithRateLimit(c, limiter)
		ctx := context.Background()
		_, err := lc.SayHello(ctx, &pb.HelloRequest{Name: "x"}, pb.EmptyCallOption{}, pb.EmptyCallOption{})
		require.NoError(t, err)
		require.Equal(t, 2, c.opts, "the options are passed on")
		_, err = lc.SayHello(ctx, &pb.HelloRequest{Name: "x"})
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		_, err = lc.Ping(ctx, &pb.HelloRequest{}, pb.EmptyCallOption{})
		require.NoError(t, err)
		require.Equal(t, 3, c.opts)
	})
}
