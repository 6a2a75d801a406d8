package ratelimitgrpc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// denyingService denies its first denials calls of Check with the status
// ratelimitgrpc.Status makes of a denial whose RetryAfter is retryAfter,
// then admits; it counts the calls it gets.
type denyingService struct {
	healthpb.UnimplementedHealthServer
	denials    int64
	retryAfter time.Duration
	err        error // returned instead of the denials when set
	midStream  bool  // Watch denies after its first message
	calls      atomic.Int64

	mu       sync.Mutex
	requests []string // the services Watch was asked about
}

func (s *denyingService) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	n := s.calls.Add(1)
	switch {
	case s.err != nil:
		return nil, s.err
	case n <= s.denials:
		st, _ := ratelimitgrpc.Status(&ratelimit.LimitError{Name: "n", RetryAfter: s.retryAfter})
		return nil, st.Err()
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// Watch denies its first denials streams as Check denies calls, then
// sends one message naming the request's service; with midStream set it
// sends that message before denying.
func (s *denyingService) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	n := s.calls.Add(1)
	s.mu.Lock()
	s.requests = append(s.requests, req.GetService())
	s.mu.Unlock()
	if n <= s.denials {
		if s.midStream {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
				return err
			}
		}
		st, _ := ratelimitgrpc.Status(&ratelimit.LimitError{Name: "n", RetryAfter: s.retryAfter})
		return st.Err()
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// retryingClient serves svc on loopback and returns a client of it that
// retries with ratelimitgrpc.UnaryClientInterceptor(maxAttempts).
func retryingClient(t *testing.T, svc *denyingService, maxAttempts int) healthpb.HealthClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, svc)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(ratelimitgrpc.UnaryClientInterceptor(maxAttempts)),
		grpc.WithStreamInterceptor(ratelimitgrpc.StreamClientInterceptor(maxAttempts)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func callCheck(client healthpb.HealthClient, ctx context.Context) codes.Code {
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	return status.Code(err)
}

// TestClientRetriesDenials: denials with RetryInfo are waited out and
// retried, up to the most attempts allowed.
func TestClientRetriesDenials(t *testing.T) {
	svc := &denyingService{denials: 2, retryAfter: 20 * time.Millisecond}
	assert.Equal(t, codes.OK, callCheck(retryingClient(t, svc, 3), context.Background()))
	assert.Equal(t, int64(3), svc.calls.Load())

	svc = &denyingService{denials: 2, retryAfter: 20 * time.Millisecond}
	assert.Equal(t, codes.ResourceExhausted, callCheck(retryingClient(t, svc, 2), context.Background()))
	assert.Equal(t, int64(2), svc.calls.Load(), "the last denial is returned")

	svc = &denyingService{denials: 1, retryAfter: 20 * time.Millisecond}
	assert.Equal(t, codes.ResourceExhausted, callCheck(retryingClient(t, svc, 0), context.Background()))
	assert.Equal(t, int64(1), svc.calls.Load(), "below 1 attempt means 1")
}

// TestClientKeepsTheDeadline: a denial whose delay ends past the call's
// deadline is returned at once, not waited for until the deadline.
func TestClientKeepsTheDeadline(t *testing.T) {
	svc := &denyingService{denials: 1, retryAfter: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	assert.Equal(t, codes.ResourceExhausted, callCheck(retryingClient(t, svc, 5), ctx))
	assert.Equal(t, int64(1), svc.calls.Load())
	assert.NoError(t, ctx.Err(), "returned before the deadline")
}

// TestClientStopsWaitingWhenCancelled: a call cancelled while it waits
// returns Canceled.
func TestClientStopsWaitingWhenCancelled(t *testing.T) {
	svc := &denyingService{denials: 1, retryAfter: time.Hour}
	client := retryingClient(t, svc, 5)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for svc.calls.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	assert.Equal(t, codes.Canceled, callCheck(client, ctx))
	assert.Equal(t, int64(1), svc.calls.Load())
}

// TestClientRetriesOnlyDenials: other errors, and ResourceExhausted
// without RetryInfo, are returned at once.
func TestClientRetriesOnlyDenials(t *testing.T) {
	for _, err := range []error{
		status.Error(codes.Unavailable, "down"),
		status.Error(codes.ResourceExhausted, "out of memory"),
	} {
		svc := &denyingService{err: err}
		assert.Equal(t, status.Code(err), callCheck(retryingClient(t, svc, 5), context.Background()))
		assert.Equal(t, int64(1), svc.calls.Load(), "%v", err)
	}
}

// receiveAll reads a Watch stream of client to its end and returns how
// many messages it got and the status it ended with.
func receiveAll(t *testing.T, client healthpb.HealthClient, ctx context.Context) (int, codes.Code) {
	t.Helper()
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "inventory"})
	require.NoError(t, err)
	n := 0
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, codes.OK
		}
		if err != nil {
			return n, status.Code(err)
		}
		n++
	}
}

// TestStreamClientRetriesDenials: a server stream denied before its first
// message is opened again after the RetryInfo's delay, with its request
// sent again, up to the most attempts allowed.
func TestStreamClientRetriesDenials(t *testing.T) {
	svc := &denyingService{denials: 2, retryAfter: 20 * time.Millisecond}
	start := time.Now()
	n, code := receiveAll(t, retryingClient(t, svc, 3), context.Background())
	assert.Equal(t, codes.OK, code)
	assert.Equal(t, 1, n)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "two delays waited")
	assert.Equal(t, int64(3), svc.calls.Load())
	svc.mu.Lock()
	assert.Equal(t, []string{"inventory", "inventory", "inventory"}, svc.requests, "the request is sent again")
	svc.mu.Unlock()

	svc = &denyingService{denials: 2, retryAfter: 20 * time.Millisecond}
	n, code = receiveAll(t, retryingClient(t, svc, 2), context.Background())
	assert.Equal(t, codes.ResourceExhausted, code, "the last denial is returned")
	assert.Zero(t, n)
	assert.Equal(t, int64(2), svc.calls.Load())

	svc = &denyingService{denials: 1, retryAfter: 20 * time.Millisecond}
	_, code = receiveAll(t, retryingClient(t, svc, 0), context.Background())
	assert.Equal(t, codes.ResourceExhausted, code)
	assert.Equal(t, int64(1), svc.calls.Load(), "below 1 attempt means 1")
}

// TestStreamClientKeepsTheDeadline: a stream denial whose delay ends past
// the call's deadline is returned at once; a stream cancelled while it
// waits returns Canceled.
func TestStreamClientKeepsTheDeadline(t *testing.T) {
	svc := &denyingService{denials: 1, retryAfter: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, code := receiveAll(t, retryingClient(t, svc, 5), ctx)
	assert.Equal(t, codes.ResourceExhausted, code)
	assert.Equal(t, int64(1), svc.calls.Load())
	assert.NoError(t, ctx.Err(), "returned before the deadline")

	svc = &denyingService{denials: 1, retryAfter: time.Hour}
	client := retryingClient(t, svc, 5)
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		for svc.calls.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, code = receiveAll(t, client, ctx)
	assert.Equal(t, codes.Canceled, code)
	assert.Equal(t, int64(1), svc.calls.Load())
}

// TestStreamClientRetriesOnlyUnstartedDenials: a stream denied after it
// delivered a message, a stream that failed otherwise and a stream whose
// descriptor says the client streams are not opened again.
func TestStreamClientRetriesOnlyUnstartedDenials(t *testing.T) {
	svc := &denyingService{denials: 1, retryAfter: 10 * time.Millisecond, midStream: true}
	n, code := receiveAll(t, retryingClient(t, svc, 5), context.Background())
	assert.Equal(t, codes.ResourceExhausted, code)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(1), svc.calls.Load())

	for _, err := range []error{
		status.Error(codes.Unavailable, "down"),
		status.Error(codes.ResourceExhausted, "out of memory"),
	} {
		svc := &unavailableWatch{err: err}
		ln, lerr := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, lerr)
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, svc)
		go srv.Serve(ln)
		t.Cleanup(srv.Stop)
		conn, cerr := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStreamInterceptor(ratelimitgrpc.StreamClientInterceptor(5)))
		require.NoError(t, cerr)
		t.Cleanup(func() { conn.Close() })
		_, code := receiveAll(t, healthpb.NewHealthClient(conn), context.Background())
		assert.Equal(t, status.Code(err), code)
		assert.Equal(t, int64(1), svc.calls.Load(), "%v", err)
	}

	// A bidirectional descriptor: the messages sent are not kept, so the
	// stream is not retried.
	svc = &denyingService{denials: 1, retryAfter: 10 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, svc)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(ratelimitgrpc.StreamClientInterceptor(5)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	stream, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/grpc.health.v1.Health/Watch")
	require.NoError(t, err)
	require.NoError(t, stream.SendMsg(&healthpb.HealthCheckRequest{}))
	require.NoError(t, stream.CloseSend())
	err = stream.RecvMsg(&healthpb.HealthCheckResponse{})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	assert.Equal(t, int64(1), svc.calls.Load())
}

// unavailableWatch fails every Watch with err.
type unavailableWatch struct {
	healthpb.UnimplementedHealthServer
	err   error
	calls atomic.Int64
}

func (s *unavailableWatch) Watch(*healthpb.HealthCheckRequest, grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	s.calls.Add(1)
	return s.err
}

// TestStreamClientWaitsOutTheServer: with the adapter's interceptors on
// both sides, a client whose stream the server's limit denies waits its
// turn and gets the stream; the header it reads first is the admitted
// stream's.
func TestStreamClientWaitsOutTheServer(t *testing.T) {
	limiter := ratelimit.NewMemory()
	rule := &ratelimit.Rule{Name: "watch", Limits: []ratelimit.Limit{{Period: 150 * time.Millisecond, Threshold: 1}}}
	client := serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(limiter, watchMethod, rule, ratelimitgrpc.PeerIP()),
		ratelimitgrpc.Headers(),
	}, grpc.WithStreamInterceptor(ratelimitgrpc.StreamClientInterceptor(3)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	for i := range 3 {
		stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		header, err := stream.Header()
		require.NoError(t, err)
		assert.Equal(t, []string{`"watch";q=1;w=1`}, header.Get("ratelimit-policy"), "stream %d", i)
		res, err := stream.Recv()
		require.NoError(t, err, "stream %d", i)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, res.GetStatus())
		_, err = stream.Recv()
		assert.ErrorIs(t, err, io.EOF)
	}
	assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "the later streams waited their turns")
}
