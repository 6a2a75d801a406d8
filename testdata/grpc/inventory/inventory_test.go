package inventory_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/grpc/inventory"
	"github.com/ratelimitgen/ratelimitgen/testdata/grpc/inventory/auth"
	pb "github.com/ratelimitgen/ratelimitgen/testdata/grpc/inventorypb"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// handlerErrors keeps the error the latest handler returned: what Go
// callers of the decorator get, before the adapter makes a status of it.
type handlerErrors struct {
	mu   sync.Mutex
	last error
}

func (h *handlerErrors) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = err
}

func (h *handlerErrors) get() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// serve registers impl on a real gRPC server on a free loopback port,
// behind the adapter's interceptors made with opts (outermost) and
// interceptors that record what the handlers return, and returns a real
// client of it.
func serve(t *testing.T, impl pb.InventoryServer, opts ...ratelimitgrpc.Option) (pb.InventoryClient, *handlerErrors) {
	t.Helper()
	h := &handlerErrors{}
	s := grpc.NewServer(
		grpc.ChainUnaryInterceptor(ratelimitgrpc.UnaryServerInterceptor(opts...), func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			resp, err := handler(ctx, req)
			h.set(err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(ratelimitgrpc.StreamServerInterceptor(opts...), func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			err := handler(srv, ss)
			h.set(err)
			return err
		}),
	)
	pb.RegisterInventoryServer(s, impl)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return pb.NewInventoryClient(conn), h
}

// decorated serves the generated decorator of inventory.Server.
func decorated(t *testing.T, limiter ratelimit.Limiter, opts ...ratelimitgrpc.Option) (pb.InventoryClient, *handlerErrors) {
	t.Helper()
	return serve(t, inventory.NewLimitedInventoryWithRateLimit(inventory.Server{}, limiter), opts...)
}

func withAPIKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, auth.Header, key)
}

// get calls Get and returns the status the client saw and the trailers,
// which hold the encoded details.
func get(t *testing.T, client pb.InventoryClient, ctx context.Context) (*status.Status, metadata.MD) {
	t.Helper()
	var trailer metadata.MD
	_, err := client.Get(ctx, &pb.GetRequest{Sku: "sku-1"}, grpc.Trailer(&trailer))
	return status.Convert(err), trailer
}

// assertNothingOfGo fails unless the status, as encoded, holds none of
// the texts (Go expressions, keys).
func assertNothingOfGo(t *testing.T, st *status.Status, texts ...string) {
	t.Helper()
	raw, err := proto.Marshal(st.Proto())
	require.NoError(t, err)
	for _, text := range append(texts, "ratelimit: key is") {
		assert.NotContains(t, string(raw), text)
	}
}

// TestMissingCredentialIsInvalidArgument (issue 19: "emptykey=deny, no
// credential → Unknown: ratelimit: key is empty: inventory.get:
// principal(ctx) is empty"): the client gets InvalidArgument naming the
// limit, without the Go expression; the decorator's Go error is unchanged.
func TestMissingCredentialIsInvalidArgument(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		client, h := decorated(t, limiter)
		st, _ := get(t, client, context.Background())
		assert.Equal(t, codes.InvalidArgument, st.Code(), "%v", st.Err())
		assert.Equal(t, "ratelimit: inventory.get: the call has no rate limit key", st.Message())
		assert.Empty(t, st.Details())
		assertNothingOfGo(t, st, "principal(ctx)")
		require.ErrorIs(t, h.get(), ratelimit.ErrEmptyKey)
		assert.EqualError(t, h.get(), "ratelimit: key is empty: inventory.get: principal(ctx) is empty")

		st, _ = get(t, client, withAPIKey(context.Background(), "ada"))
		assert.Equal(t, codes.OK, st.Code(), "%v", st.Err())
	})
}

// TestUnsetOptionalKeyIsInvalidArgument (issue 19: "key=req.Tenant on an
// unset optional string → Unknown: … key is nil: inventory.watch:
// req.Tenant is nil"): a stream without its tenant is InvalidArgument
// naming the limit, without the field's Go path.
func TestUnsetOptionalKeyIsInvalidArgument(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		client, h := decorated(t, limiter)
		stream, err := client.Watch(context.Background(), &pb.WatchRequest{Sku: "sku-1"})
		require.NoError(t, err)
		_, err = stream.Recv()
		st := status.Convert(err)
		assert.Equal(t, codes.InvalidArgument, st.Code(), "%v", err)
		assert.Equal(t, "ratelimit: inventory.watch: the call has no rate limit key", st.Message())
		assertNothingOfGo(t, st, "Tenant")
		require.ErrorIs(t, h.get(), ratelimit.ErrNilKey)
		assert.EqualError(t, h.get(), "ratelimit: key is nil: inventory.watch: req.Tenant is nil")

		stream, err = client.Watch(context.Background(), &pb.WatchRequest{Tenant: proto.String("acme"), Sku: "sku-1"})
		require.NoError(t, err)
		item, err := stream.Recv()
		require.NoError(t, err, "a tenant set")
		assert.Equal(t, "sku-1", item.GetSku())
		_, err = stream.Recv()
		assert.ErrorIs(t, err, io.EOF)
	})
}

// TestCostAboveEveryLimitIsInvalidArgument (issue 19: "25 units against
// threshold=20 cost=skuCount(req) → Unknown: … cost 25 can never be
// admitted by limit 20 per 10s"): the client gets InvalidArgument with a
// QuotaFailure naming the limit.
func TestCostAboveEveryLimitIsInvalidArgument(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		client, h := decorated(t, limiter)
		var trailer metadata.MD
		_, err := client.Reserve(context.Background(), &pb.ReserveRequest{Lines: []*pb.Line{
			{Sku: "sku-1", Quantity: 10}, {Sku: "sku-2", Quantity: 15},
		}}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		assert.Equal(t, codes.InvalidArgument, st.Code(), "%v", err)
		assert.Equal(t, "ratelimit: inventory.reserve: cost 25 can never be admitted by limit 20 per 10s", st.Message())
		require.Len(t, st.Details(), 1)
		quota, ok := st.Details()[0].(*errdetails.QuotaFailure)
		require.True(t, ok, "%T", st.Details()[0])
		require.Len(t, quota.GetViolations(), 1)
		assert.Equal(t, "inventory.reserve", quota.GetViolations()[0].GetSubject())
		assert.Equal(t, int64(20), quota.GetViolations()[0].GetQuotaValue())
		assert.Contains(t, trailer, "grpc-status-details-bin")
		assertNothingOfGo(t, st, "skuCount")
		var ce *ratelimit.CostError
		require.ErrorAs(t, h.get(), &ce)
		assert.ErrorIs(t, h.get(), ratelimit.ErrInvalidLimit)

		res, err := client.Reserve(context.Background(), &pb.ReserveRequest{Lines: []*pb.Line{{Sku: "sku-1", Quantity: 20}}})
		require.NoError(t, err, "20 units fit")
		assert.Equal(t, int64(20), res.GetUnits())
	})
}

// TestMissingKeyAgreesWithTheInterceptor (issue 19: "The adapter's own
// Limit(…, Metadata(…)) path answers InvalidArgument for the same missing
// key, so the two paths disagree."): a call without its API key gets one
// status whether the generated decorator or the interceptor's Limit
// limits it, and MissingKeyCode changes both.
func TestMissingKeyAgreesWithTheInterceptor(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		rule := &ratelimit.Rule{Name: "inventory.get", Limits: []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 5}}}
		limit := ratelimitgrpc.Limit(limiter, pb.Inventory_Get_FullMethodName, rule, ratelimitgrpc.Metadata(auth.Header))
		for _, tc := range []struct {
			opts []ratelimitgrpc.Option
			want codes.Code
		}{
			{nil, codes.InvalidArgument},
			{[]ratelimitgrpc.Option{ratelimitgrpc.MissingKeyCode(codes.Unauthenticated)}, codes.Unauthenticated},
		} {
			byDecorator, _ := decorated(t, limiter, tc.opts...)
			byInterceptor, h := serve(t, inventory.Server{}, append([]ratelimitgrpc.Option{limit}, tc.opts...)...)
			fromDecorator, _ := get(t, byDecorator, context.Background())
			fromInterceptor, _ := get(t, byInterceptor, context.Background())
			assert.Equal(t, tc.want, fromDecorator.Code(), "%v", fromDecorator.Err())
			assert.True(t, proto.Equal(fromDecorator.Proto(), fromInterceptor.Proto()), "decorator %v, interceptor %v", fromDecorator.Proto(), fromInterceptor.Proto())
			assert.NoError(t, h.get(), "the interceptor's check stopped the call before its handler")

			st, _ := get(t, byInterceptor, withAPIKey(context.Background(), "ada"))
			assert.Equal(t, codes.OK, st.Code(), "%v", st.Err())
		}
	})
}

// TestKeyFunctionStatusPassesThrough (issue 19: "A key function that
// returns status.Error(codes.Unauthenticated, "missing x-api-key") keeps
// its code, but the client reads `ratelimit: inventory.get:
// auth.Principal(ctx): rpc error: code = Unauthenticated desc = missing
// x-api-key`"): the client reads the function's status as it made it,
// through the decorator and through the interceptor's KeyFunc alike.
func TestKeyFunctionStatusPassesThrough(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		_, want := auth.Principal(context.Background())
		client, h := decorated(t, limiter)
		_, err := client.Lookup(context.Background(), &pb.GetRequest{Sku: "sku-1"})
		st := status.Convert(err)
		assert.Equal(t, codes.Unauthenticated, st.Code(), "%v", err)
		assert.Equal(t, "missing x-api-key", st.Message())
		assert.True(t, proto.Equal(status.Convert(want).Proto(), st.Proto()), "%v", st.Proto())
		assertNothingOfGo(t, st, "auth.Principal", "inventory.lookup")
		var fe *ratelimit.FuncError
		require.ErrorAs(t, h.get(), &fe, "the Go error still names the call")
		assert.Equal(t, "auth.Principal(ctx)", fe.Expr)
		assert.ErrorIs(t, h.get(), want)

		_, err = client.Lookup(withAPIKey(context.Background(), "ada"), &pb.GetRequest{Sku: "sku-1"})
		require.NoError(t, err)

		rule := &ratelimit.Rule{Name: "inventory.lookup", Limits: []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 5}}}
		byInterceptor, _ := serve(t, inventory.Server{}, ratelimitgrpc.Limit(limiter, pb.Inventory_Lookup_FullMethodName, rule, auth.Principal))
		_, err = byInterceptor.Lookup(context.Background(), &pb.GetRequest{Sku: "sku-1"})
		assert.True(t, proto.Equal(st.Proto(), status.Convert(err).Proto()), "the interceptor's KeyFunc: %v", err)
	})
}
