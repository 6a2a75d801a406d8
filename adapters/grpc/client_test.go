package ratelimitgrpc_test

import (
	"context"
	"net"
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
	calls      atomic.Int64
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
		grpc.WithUnaryInterceptor(ratelimitgrpc.UnaryClientInterceptor(maxAttempts)))
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
