package ratelimitgrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// blockingHealth holds each Check until told to answer.
type blockingHealth struct {
	healthService
	started chan struct{}
	answer  chan struct{}
}

func (s *blockingHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.started <- struct{}{}
	<-s.answer
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestConcurrencyLimitHoldsASlotPerCall: a rule with a concurrency limit
// admits two calls in flight; the third is ResourceExhausted, and a slot
// frees when a call returns.
func TestConcurrencyLimitHoldsASlotPerCall(t *testing.T) {
	limiter := ratelimit.NewMemory()
	rule := &ratelimit.Rule{Name: "inflight", Limits: []ratelimit.Limit{{Algorithm: "concurrency", Threshold: 2, Period: time.Minute}}}
	svc := &blockingHealth{started: make(chan struct{}, 2), answer: make(chan struct{})}
	client := serveBlocking(t, svc, []ratelimitgrpc.Option{ratelimitgrpc.Limit(limiter, checkMethod, rule, nil)})
	ctx := context.Background()
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
			done <- err
		}()
		<-svc.started
	}
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "has 2 calls in flight, its most")
	svc.answer <- struct{}{}
	require.NoError(t, <-done)
	go func() {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		done <- err
	}()
	<-svc.started // a slot was free again
	close(svc.answer)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
}

// serveBlocking is serve for a blockingHealth.
func serveBlocking(t *testing.T, svc healthpb.HealthServer, opts []ratelimitgrpc.Option) healthpb.HealthClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(ratelimitgrpc.UnaryServerInterceptor(opts...)),
		grpc.StreamInterceptor(ratelimitgrpc.StreamServerInterceptor(opts...)),
	)
	healthpb.RegisterHealthServer(srv, svc)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}
