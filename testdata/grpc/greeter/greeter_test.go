package greeter_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/grpc/greeter"
	pb "github.com/ratelimitgen/ratelimitgen/testdata/grpc/greeterpb"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// handlerErrors keeps the error each handler returned, in call order.
type handlerErrors struct {
	mu   sync.Mutex
	errs []error
}

func (h *handlerErrors) add(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err)
}

// last returns the error of the latest call.
func (h *handlerErrors) last(t *testing.T) error {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.NotEmpty(t, h.errs)
	return h.errs[len(h.errs)-1]
}

// serve registers the decorated greeter on a real gRPC server on a free
// loopback port and returns a real client of it, and the errors its
// handlers return.
func serve(t *testing.T, limiter ratelimit.Limiter) (pb.GreeterClient, *handlerErrors) {
	t.Helper()
	h := &handlerErrors{}
	s := grpc.NewServer(
		// The adapter, outermost, turns denials into gRPC statuses and
		// sends the RateLimit metadata of admitted calls; the inner
		// interceptors see what the handlers return.
		grpc.ChainUnaryInterceptor(ratelimitgrpc.UnaryServerInterceptor(ratelimitgrpc.Headers()), func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			resp, err := handler(ctx, req)
			h.add(err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(ratelimitgrpc.StreamServerInterceptor(ratelimitgrpc.Headers()), func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			h.add(err)
			return err
		}),
	)
	pb.RegisterGreeterServer(s, greeter.NewLimitedGreeterWithRateLimit(greeter.Server{}, limiter))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return pb.NewGreeterClient(conn), h
}

func as(ctx context.Context, user string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, greeter.UserHeader, user)
}

// limitError returns the *LimitError err holds.
func limitError(t *testing.T, err error) *ratelimit.LimitError {
	t.Helper()
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	return le
}

func TestUnaryIsLimitedPerPrincipal(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		client, h := serve(t, limiter)
		ctx := context.Background()
		for range 2 {
			reply, err := client.SayHello(as(ctx, "alice"), &pb.HelloRequest{Name: "alice"})
			require.NoError(t, err)
			require.Equal(t, "hello alice", reply.GetMessage())
		}
		_, err := client.SayHello(as(ctx, "alice"), &pb.HelloRequest{Name: "alice"})
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "the denial reaches the client: %v", err)
		le := limitError(t, h.last(t))
		require.Equal(t, "alice", le.Key)
		require.Positive(t, le.RetryAfter)

		_, err = client.SayHello(as(ctx, "bob"), &pb.HelloRequest{Name: "bob"})
		require.NoError(t, err, "another principal has a limit of its own")
		require.NoError(t, h.last(t))

		_, err = client.SayHello(ctx, &pb.HelloRequest{Name: "nobody"})
		require.Error(t, err)
		require.ErrorIs(t, h.last(t), ratelimit.ErrEmptyKey, "a call without a principal is denied, not limited under \"\"")
	})
}

// receive reads a server stream to its end and returns the messages.
func receive(stream grpc.ServerStreamingClient[pb.HelloReply]) ([]string, error) {
	var out []string
	for {
		reply, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, reply.GetMessage())
	}
}

func TestServerStreamIsLimitedWithItsContext(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		client, h := serve(t, limiter)
		ctx := as(context.Background(), "alice")
		stream, err := client.StreamHellos(ctx, &pb.HelloRequest{Name: "alice", Count: 2})
		require.NoError(t, err)
		got, err := receive(stream)
		require.NoError(t, err)
		require.Equal(t, []string{"hello alice", "hello alice"}, got)

		// The next stream would wait a minute for its turn (wait=1m); the
		// client's deadline reaches the handler through the stream's
		// context, so the limiter turns it away instead.
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		stream, err = client.StreamHellos(short, &pb.HelloRequest{Name: "alice", Count: 2})
		require.NoError(t, err)
		got, err = receive(stream)
		require.Equal(t, codes.ResourceExhausted, status.Code(err), "the denial reaches the client: %v", err)
		require.Empty(t, got)
		le := limitError(t, h.last(t))
		require.Equal(t, "alice", le.Key, "keyed by the principal of the stream's context")

		stream, err = client.StreamHellos(as(context.Background(), "bob"), &pb.HelloRequest{Name: "bob", Count: 1})
		require.NoError(t, err)
		got, err = receive(stream)
		require.NoError(t, err)
		require.Equal(t, []string{"hello bob"}, got)
	})
}

// TestAdmittedCallsCarryRateLimitMetadata: the header of a call the
// generated decorator admitted describes its limit, for a unary call and
// for a stream (limited with the stream's context).
func TestAdmittedCallsCarryRateLimitMetadata(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		client, _ := serve(t, limiter)
		ctx := as(context.Background(), "alice")
		var header metadata.MD
		_, err := client.SayHello(ctx, &pb.HelloRequest{Name: "alice"}, grpc.Header(&header))
		require.NoError(t, err)
		const pkg = "github.com/ratelimitgen/ratelimitgen/testdata/grpc/greeter.LimitedGreeter."
		require.Equal(t, []string{`"` + pkg + `SayHello";q=2;w=60`}, header.Get("ratelimit-policy"))
		require.Equal(t, []string{`"` + pkg + `SayHello";r=1;t=60`}, header.Get("ratelimit"))

		stream, err := client.StreamHellos(ctx, &pb.HelloRequest{Name: "alice", Count: 1})
		require.NoError(t, err)
		header, err = stream.Header()
		require.NoError(t, err)
		require.Equal(t, []string{`"` + pkg + `StreamHellos";r=0;t=60`}, header.Get("ratelimit"))
		_, err = receive(stream)
		require.NoError(t, err)
	})
}
