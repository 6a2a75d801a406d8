package ratelimitgrpc_test

import (
	"context"
	"errors"
	"fmt"
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
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The tests of this file check each row of the package's table of
// statuses over a real server and client: the errors generated decorators
// return from handlers (made here as they make them) and the checks of
// the interceptors' own limits, which must agree.

// watch opens a Watch stream and reads it to its end, returning what the
// client saw of it.
func watch(t *testing.T, client healthpb.HealthClient, ctx context.Context, service string) reply {
	t.Helper()
	var r reply
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	require.NoError(t, err)
	for {
		if _, err := stream.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			break
		}
	}
	r.header, _ = stream.Header()
	r.trailer = stream.Trailer()
	r.status = status.Convert(r.err)
	return r
}

// assertSameStatus fails unless the two statuses are equal: code, message
// and details.
func assertSameStatus(t *testing.T, want, got *status.Status, msgAndArgs ...any) {
	t.Helper()
	assert.True(t, proto.Equal(want.Proto(), got.Proto()), "want %v, got %v %v", want.Proto(), got.Proto(), msgAndArgs)
}

// TestEmptyKeyIsInvalidArgument: a decorator's call whose key is empty
// under emptykey=deny is InvalidArgument naming the limit, without the
// key expression.
func TestEmptyKeyIsInvalidArgument(t *testing.T) {
	client := serve(t, &healthService{err: &ratelimit.KeyError{Name: "inventory.get", Expr: "principal(ctx)", Err: ratelimit.ErrEmptyKey}}, nil)
	r := check(t, client, context.Background(), "")
	assert.Equal(t, codes.InvalidArgument, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: inventory.get: the call has no rate limit key", r.status.Message())
	assert.Empty(t, r.status.Details())
	assertNoKey(t, r, "principal")
}

// TestNilKeyIsInvalidArgument: a decorator's stream whose key sits behind
// a nil pointer (an unset optional field) is InvalidArgument naming the
// limit, without the field's Go path.
func TestNilKeyIsInvalidArgument(t *testing.T) {
	client := serve(t, &healthService{watchErr: &ratelimit.KeyError{Name: "inventory.watch", Expr: "req.Tenant", Err: ratelimit.ErrNilKey}}, nil)
	r := watch(t, client, context.Background(), "")
	assert.Equal(t, codes.InvalidArgument, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: inventory.watch: the call has no rate limit key", r.status.Message())
	assertNoKey(t, r, "Tenant")
}

// TestMissingKeyIsOneStatus: a call without the key of the interceptor's
// limit (Metadata) gets the status of a decorator's call without its key,
// for the same limit name; MissingKeyCode changes both.
func TestMissingKeyIsOneStatus(t *testing.T) {
	limiter := ratelimit.NewMemory()
	for _, tc := range []struct {
		opts []ratelimitgrpc.Option
		want codes.Code
	}{
		{nil, codes.InvalidArgument},
		{[]ratelimitgrpc.Option{ratelimitgrpc.MissingKeyCode(codes.Unauthenticated)}, codes.Unauthenticated},
		{[]ratelimitgrpc.Option{ratelimitgrpc.MissingKeyCode(codes.OK)}, codes.InvalidArgument},
	} {
		limited := append([]ratelimitgrpc.Option{
			ratelimitgrpc.Limit(limiter, checkMethod, hourly("inventory.get", 5), ratelimitgrpc.Metadata("x-api-key")),
			ratelimitgrpc.Limit(limiter, watchMethod, hourly("inventory.get", 5), ratelimitgrpc.PeerIP()),
		}, tc.opts...)
		byInterceptor := check(t, serve(t, &healthService{}, limited), context.Background(), "")
		byDecorator := check(t, serve(t, &healthService{err: &ratelimit.KeyError{Name: "inventory.get", Expr: "principal(ctx)", Err: ratelimit.ErrEmptyKey}}, tc.opts), context.Background(), "")
		assert.Equal(t, tc.want, byInterceptor.status.Code(), "%v", byInterceptor.err)
		assertSameStatus(t, byDecorator.status, byInterceptor.status)

		nilKey := watch(t, serve(t, &healthService{watchErr: &ratelimit.KeyError{Name: "inventory.get", Expr: "req.Tenant", Err: ratelimit.ErrNilKey}}, tc.opts), context.Background(), "")
		assertSameStatus(t, byDecorator.status, nilKey.status, "a nil key is a missing key")
	}
}

// authFailure is the status an authentication function returns, with a
// detail of its own.
func authFailure(t *testing.T) *status.Status {
	st, err := status.New(codes.Unauthenticated, "missing x-api-key").WithDetails(&errdetails.ErrorInfo{Reason: "API_KEY_MISSING", Domain: "inventory.example.com"})
	require.NoError(t, err)
	return st
}

// TestFunctionStatusPassesThrough: a gRPC status that a key or cost
// function returns reaches the client as the function made it (code,
// message, details), without the Go expression, whether a decorator
// (a *ratelimit.FuncError) or the interceptor's KeyFunc called it.
func TestFunctionStatusPassesThrough(t *testing.T) {
	want := authFailure(t)
	fromDecorator := check(t, serve(t, &healthService{err: ratelimitFuncError("inventory.get", "auth.Principal(ctx)", want.Err())}, nil), context.Background(), "")
	assertSameStatus(t, want, fromDecorator.status)
	assert.Equal(t, "missing x-api-key", fromDecorator.status.Message())
	assertNoKey(t, fromDecorator, "Principal")

	stream := watch(t, serve(t, &healthService{watchErr: ratelimitFuncError("inventory.watch", "skuCount(req)", want.Err())}, nil), context.Background(), "")
	assertSameStatus(t, want, stream.status, "a stream")

	byKeyFunc := func(context.Context) (string, error) { return "", want.Err() }
	fromInterceptor := check(t, serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(ratelimit.NewMemory(), checkMethod, hourly("inventory.get", 5), byKeyFunc),
	}), context.Background(), "")
	assertSameStatus(t, want, fromInterceptor.status)
}

// TestFunctionErrorHidesItsText: any other error of a key or cost
// function is InvalidArgument naming the limit, without the error's text
// or the Go expression, on both paths.
func TestFunctionErrorHidesItsText(t *testing.T) {
	cause := errors.New("no principal for " + secret)
	fromDecorator := check(t, serve(t, &healthService{err: ratelimitFuncError("inventory.get", "auth.Principal(ctx)", cause)}, nil), context.Background(), "")
	assert.Equal(t, codes.InvalidArgument, fromDecorator.status.Code(), "%v", fromDecorator.err)
	assert.Equal(t, "ratelimit: inventory.get: the call's rate limit key or cost could not be found", fromDecorator.status.Message())
	assertNoKey(t, fromDecorator, secret)
	assertNoKey(t, fromDecorator, "Principal")

	byKeyFunc := func(context.Context) (string, error) { return "", cause }
	fromInterceptor := check(t, serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(ratelimit.NewMemory(), checkMethod, hourly("inventory.get", 5), byKeyFunc),
	}), context.Background(), "")
	assertSameStatus(t, fromDecorator.status, fromInterceptor.status)

	// A function that fails with a rate limiting error of its own (it
	// called another limited method, say) gets that error's status.
	st, ok := ratelimitgrpc.Status(ratelimitFuncError("inventory.get", "auth.Principal(ctx)",
		&ratelimit.LimitError{Name: "auth", Key: secret, RetryAfter: time.Second, Limit: ratelimit.Limit{Period: time.Minute, Threshold: 3}}))
	require.True(t, ok)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	assert.Equal(t, "ratelimit: auth exceeded 3 per 1m0s; retry after 1s", st.Message())
}

// TestImpossibleCostIsInvalidArgument: a cost no limit can ever admit is
// InvalidArgument with a QuotaFailure naming the limit; a negative cost is
// InvalidArgument.
func TestImpossibleCostIsInvalidArgument(t *testing.T) {
	limiter := ratelimit.NewMemory()
	rule := &ratelimit.Rule{Name: "inventory.reserve", Limits: []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 20}}}
	r := check(t, serve(t, &healthService{limiter: limiter, rule: rule, cost: 25}, nil), context.Background(), secret)
	assert.Equal(t, codes.InvalidArgument, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: inventory.reserve: cost 25 can never be admitted by limit 20 per 10s", r.status.Message())
	require.Len(t, r.status.Details(), 1)
	quota, ok := r.status.Details()[0].(*errdetails.QuotaFailure)
	require.True(t, ok, "%T", r.status.Details()[0])
	require.Len(t, quota.GetViolations(), 1)
	assert.Equal(t, "inventory.reserve", quota.GetViolations()[0].GetSubject())
	assert.Equal(t, int64(20), quota.GetViolations()[0].GetQuotaValue())
	assert.Equal(t, "cost 25 exceeds the 20 units rate limit 20/10s (sliding_log) can ever admit at once", quota.GetViolations()[0].GetDescription())
	assertNoKey(t, r, secret)

	r = check(t, serve(t, &healthService{limiter: limiter, rule: rule, cost: -1}, nil), context.Background(), secret)
	assert.Equal(t, codes.InvalidArgument, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: inventory.reserve: cost -1 is negative", r.status.Message())
	assert.Empty(t, r.status.Details())
}

// TestHandlerInvalidRuleIsInternal: a decorator's rule no limiter can
// decide is Internal, as the interceptor's is (TestInvalidRuleIsInternal).
func TestHandlerInvalidRuleIsInternal(t *testing.T) {
	invalid := &ratelimit.Rule{Name: "bad", Limits: []ratelimit.Limit{{Period: time.Hour}}}
	r := check(t, serve(t, &healthService{limiter: ratelimit.NewMemory(), rule: invalid}, nil), context.Background(), secret)
	assert.Equal(t, codes.Internal, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: the call could not be decided", r.status.Message())
	assertNoKey(t, r, secret)
}

// TestEndedContextIsItsStatus: a call whose context ends while it waits
// for its turn gets the context's status, not the denial's, on both
// paths; an interceptor outside the adapter's sees it (the client sees its
// own).
func TestEndedContextIsItsStatus(t *testing.T) {
	limiter := ratelimit.NewMemory()
	waiting := func(name string) *ratelimit.Rule {
		r := hourly(name, 1)
		r.Wait = 2 * time.Hour
		return r
	}
	seen := make(chan error, 1)
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		seen <- err
		return resp, err
	}
	for _, tc := range []struct {
		name string
		svc  *healthService
		opts []ratelimitgrpc.Option
	}{
		{"decorator", &healthService{limiter: limiter, rule: waiting("decorated")}, nil},
		{"interceptor", &healthService{}, []ratelimitgrpc.Option{ratelimitgrpc.Limit(limiter, checkMethod, waiting("intercepted"), ratelimitgrpc.Metadata("x-user"))}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(record, ratelimitgrpc.UnaryServerInterceptor(tc.opts...)))
		healthpb.RegisterHealthServer(srv, tc.svc)
		go srv.Serve(ln)
		t.Cleanup(srv.Stop)
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		client := healthpb.NewHealthClient(conn)

		ctx := withUser(context.Background(), secret)
		require.NoError(t, check(t, client, ctx, secret).err, tc.name)
		require.NoError(t, <-seen)
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(50*time.Millisecond, cancel)
		r := check(t, client, ctx, secret)
		assert.Equal(t, codes.Canceled, r.status.Code(), "%s: %v", tc.name, r.err)
		got := status.Convert(<-seen)
		assert.Equal(t, codes.Canceled, got.Code(), "%s: the adapter's status: %v", tc.name, got)
		assert.Equal(t, "context canceled", got.Message(), tc.name)
	}
}

// TestDenyStatus: DenyStatus shapes the status of every denial, the
// interceptor's and the decorator's, in unary calls and streams; a nil
// status keeps the default.
func TestDenyStatus(t *testing.T) {
	limiter := ratelimit.NewMemory(ratelimit.WithClock(fixedClock{time.Unix(1_800_000_000, 0)}))
	var (
		mu   sync.Mutex
		keys []string
	)
	deny := ratelimitgrpc.DenyStatus(func(ctx context.Context, denial *ratelimit.LimitError, st *status.Status) *status.Status {
		mu.Lock()
		keys = append(keys, denial.Key)
		mu.Unlock()
		if denial.Name == "plain" {
			return nil
		}
		p := st.Proto()
		p.Message = "slow down: " + denial.Name
		shaped := status.FromProto(p)
		shaped, err := shaped.WithDetails(&errdetails.Help{Links: []*errdetails.Help_Link{{Description: "quotas", Url: "https://example.com/quotas"}}})
		require.NoError(t, err)
		return shaped
	})
	opts := []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(limiter, checkMethod, hourly("intercepted", 1), ratelimitgrpc.Metadata("x-user")),
		deny,
	}
	client := serve(t, &healthService{limiter: limiter, rule: hourly("decorated", 1)}, opts)
	ctx := withUser(context.Background(), "ada")
	require.NoError(t, check(t, client, ctx, "s1").err)
	r := check(t, client, ctx, "s2")
	assert.Equal(t, "slow down: intercepted", r.status.Message())
	helped := func(st *status.Status) {
		t.Helper()
		assert.Equal(t, codes.ResourceExhausted, st.Code())
		require.Len(t, st.Details(), 4, "RetryInfo, QuotaFailure, ErrorInfo and Help")
		assert.IsType(t, &errdetails.Help{}, st.Details()[3])
	}
	helped(r.status)

	r = check(t, client, withUser(context.Background(), "bob"), "s1")
	assert.Equal(t, "slow down: decorated", r.status.Message(), "the handler's denial")
	helped(r.status)

	stream := watch(t, client, context.Background(), "s1")
	assert.Equal(t, "slow down: decorated", stream.status.Message(), "a stream's denial")
	helped(stream.status)
	mu.Lock()
	assert.Equal(t, []string{"ada", "s1", "s1"}, keys, "the hook sees the denials")
	mu.Unlock()

	plain := serve(t, &healthService{limiter: limiter, rule: hourly("plain", 1)}, []ratelimitgrpc.Option{deny})
	require.NoError(t, check(t, plain, ctx, "p").err)
	r = check(t, plain, ctx, "p")
	assert.Equal(t, "ratelimit: plain exceeded 1 per 1h0m0s; retry after 1h0m0s", r.status.Message(), "nil keeps the default")
	retry, _ := details(t, r.status)
	assert.Equal(t, time.Hour, retry.GetRetryDelay().AsDuration())
}

// TestLimitByServiceAndPattern: LimitService and LimitMatch limit the
// methods they choose with one shared rule; a method's own Limit comes
// first (a nil rule exempts it), then its service's, then the last
// matching pattern.
func TestLimitByServiceAndPattern(t *testing.T) {
	limiter := ratelimit.NewMemory()
	const listMethod = "/grpc.health.v1.Health/List"
	list := func(client healthpb.HealthClient, ctx context.Context) codes.Code {
		_, err := client.List(ctx, &healthpb.HealthListRequest{})
		return status.Code(err)
	}
	ctx := withUser(context.Background(), "ada")

	// One rule for the whole service: its methods share the budget.
	client := serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.LimitService(limiter, "grpc.health.v1.Health", hourly("health", 2), ratelimitgrpc.Metadata("x-user")),
	})
	assert.NoError(t, check(t, client, ctx, "").err)
	assert.NoError(t, watch(t, client, ctx, "").err)
	r := check(t, client, ctx, "")
	require.Equal(t, codes.ResourceExhausted, r.status.Code(), "%v", r.err)
	_, quota := details(t, r.status)
	assert.Equal(t, "health", quota.GetViolations()[0].GetSubject())
	assert.Equal(t, codes.ResourceExhausted, list(client, ctx), "List too")
	assert.NoError(t, check(t, client, withUser(context.Background(), "bob"), "").err, "per key")

	// A pattern; the method's own Limit and a nil rule come first, and
	// of two patterns the later applies.
	client = serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.LimitMatch(limiter, "/*/*", hourly("everything", 1), nil),
		ratelimitgrpc.LimitMatch(limiter, "/grpc.health.*/[CW]*", hourly("check-or-watch", 2), nil),
		ratelimitgrpc.Limit(limiter, checkMethod, nil, nil),
	})
	for range 5 {
		require.NoError(t, check(t, client, ctx, "").err, "exempt by its own Limit")
	}
	assert.NoError(t, watch(t, client, ctx, "").err)
	assert.NoError(t, watch(t, client, ctx, "").err)
	r = watch(t, client, ctx, "")
	require.Equal(t, codes.ResourceExhausted, r.status.Code(), "%v", r.err)
	_, quota = details(t, r.status)
	assert.Equal(t, "check-or-watch", quota.GetViolations()[0].GetSubject())
	assert.Equal(t, codes.Unimplemented, list(client, ctx), "List matches only /*/*: admitted, then unimplemented")
	assert.Equal(t, codes.ResourceExhausted, list(client, ctx))

	// A service's limit comes before a pattern's, a method's before both.
	client = serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.LimitMatch(limiter, "/*/*", hourly("any", 100), nil),
		ratelimitgrpc.LimitService(limiter, "/grpc.health.v1.Health/", hourly("svc", 1), nil),
		ratelimitgrpc.Limit(limiter, watchMethod, hourly("watch-only", 1), nil),
	})
	assert.NoError(t, check(t, client, ctx, "").err)
	r = check(t, client, ctx, "")
	_, quota = details(t, r.status)
	assert.Equal(t, "svc", quota.GetViolations()[0].GetSubject())
	assert.NoError(t, watch(t, client, ctx, "").err, "its own limit, not the service's spent one")

	assert.PanicsWithValue(t, `ratelimitgrpc: LimitMatch("/[a-/*"): syntax error in pattern`, func() {
		ratelimitgrpc.LimitMatch(limiter, "/[a-/*", hourly("bad", 1), nil)
	})
}

// TestHandlerErrorsStayTheirs: an error that is not the rate limiter's,
// even one wrapping a status, reaches the client as gRPC makes it.
func TestHandlerErrorsStayTheirs(t *testing.T) {
	wrapped := errors.Join(errors.New("loading"), status.Error(codes.NotFound, "no such item"))
	r := check(t, serve(t, &healthService{err: wrapped}, nil), context.Background(), "")
	assert.Equal(t, codes.NotFound, r.status.Code())
	assert.Equal(t, wrapped.Error(), r.status.Message())
}

// ratelimitFuncError is the error a decorator returns when its key or cost
// function (expr) fails with err.
func ratelimitFuncError(name, expr string, err error) error {
	return &ratelimit.FuncError{Name: name, Expr: expr, Err: err}
}

// TestStatusSaysTheDenialsCause: a denial's status says why it was denied
// (issue 35): its message, its QuotaFailure (whose subject is the shared
// line that denied it, when one did) and an ErrorInfo whose reason is the
// cause, which a client can switch on; never the key.
func TestStatusSaysTheDenialsCause(t *testing.T) {
	minute := ratelimit.Limit{Period: time.Minute, Threshold: 300}
	for _, tc := range []struct {
		le              ratelimit.LimitError
		reason, subject string
		says            string
	}{
		{ratelimit.LimitError{Name: "svc.Get", Key: "k-secret", Limit: minute}, "LIMIT", "svc.Get", "exceeded 300 per 1m0s"},
		{ratelimit.LimitError{Name: "svc.Get", Key: "k-secret", Limit: minute, Line: "svc#global"}, "LIMIT", "svc#global", "shared line svc#global exceeded"},
		{ratelimit.LimitError{Name: "svc.Get", Key: "k-secret", Limit: minute, Source: ratelimit.SourceCooldown}, "COOLDOWN", "svc.Get", "cooling down"},
		{ratelimit.LimitError{Name: "svc.Get", Key: "k-secret", Limit: ratelimit.Limit{Algorithm: ratelimit.Block, Period: time.Minute}, Source: ratelimit.SourceOverride}, "BLOCKED", "svc.Get", "is blocked"},
	} {
		st, ok := ratelimitgrpc.Status(&tc.le)
		require.True(t, ok)
		assert.Equal(t, codes.ResourceExhausted, st.Code())
		assert.Contains(t, st.Message(), tc.says)
		var info *errdetails.ErrorInfo
		var quota *errdetails.QuotaFailure
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.ErrorInfo:
				info = d
			case *errdetails.QuotaFailure:
				quota = d
			}
		}
		require.NotNil(t, info, tc.says)
		require.NotNil(t, quota, tc.says)
		assert.Equal(t, tc.reason, info.Reason)
		assert.Equal(t, tc.subject, quota.Violations[0].Subject)
		assert.NotContains(t, fmt.Sprint(st.Proto()), "k-secret", "the status holds no key")
	}
}
