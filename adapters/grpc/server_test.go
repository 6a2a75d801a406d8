package ratelimitgrpc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
	// secret is the key of the limited calls: it must never reach a client.
	secret = "ada-0f9c2e"
)

// fixedClock never moves, so the RetryAfter of a denial is known.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time { return c.now }

func hourly(name string, threshold int64) *ratelimit.Rule {
	return &ratelimit.Rule{Name: name, Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: threshold}}}
}

// healthService answers the health service's calls. With rule set, its
// handlers check rule for the key the request names, as a handler calling
// a generated decorator would, and return the error as it is.
type healthService struct {
	healthpb.UnimplementedHealthServer
	limiter  ratelimit.Limiter
	rule     *ratelimit.Rule
	cost     int64 // of each call of rule; 0 means 1
	err      error // returned by Check when set
	watchErr error // returned by Watch when set
	silent   bool  // Watch returns without sending
}

func (s *healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.rule != nil {
		cost := s.cost
		if cost == 0 {
			cost = 1
		}
		if err := s.rule.Check(ctx, s.limiter, cost, req.GetService()); err != nil {
			return nil, err
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (s *healthService) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if s.watchErr != nil {
		return s.watchErr
	}
	if s.rule != nil {
		if err := s.rule.Check(stream.Context(), s.limiter, 1, req.GetService()); err != nil {
			return err
		}
	}
	if s.silent {
		return nil
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// serve runs svc on a loopback TCP port behind both interceptors made
// with opts and returns a client of it.
func serve(t *testing.T, svc *healthService, opts []ratelimitgrpc.Option, dial ...grpc.DialOption) healthpb.HealthClient {
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
	conn, err := grpc.NewClient(ln.Addr().String(), append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// reply is what a client saw of one call.
type reply struct {
	err             error
	header, trailer metadata.MD
	status          *status.Status
}

func check(t *testing.T, client healthpb.HealthClient, ctx context.Context, service string) reply {
	t.Helper()
	var r reply
	_, r.err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.Trailer(&r.trailer), grpc.Header(&r.header))
	r.status = status.Convert(r.err)
	return r
}

// withUser returns ctx carrying user as x-user metadata.
func withUser(ctx context.Context, user string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-user", user)
}

// assertNoKey fails unless key appears nowhere in what the client got: the
// status's message and encoded details, the headers and the trailers (which
// hold the raw grpc-status-details-bin).
func assertNoKey(t *testing.T, r reply, key string) {
	t.Helper()
	raw, err := proto.Marshal(r.status.Proto())
	require.NoError(t, err)
	assert.NotContains(t, r.status.Message(), key)
	assert.False(t, bytes.Contains(raw, []byte(key)), "the encoded status holds the key")
	for _, md := range []metadata.MD{r.header, r.trailer} {
		for name, values := range md {
			assert.NotContains(t, name, key)
			for _, v := range values {
				assert.NotContains(t, v, key, "metadata %s", name)
			}
		}
	}
	if len(r.status.Details()) > 0 {
		assert.Contains(t, r.trailer, "grpc-status-details-bin", "the trailers were read")
	}
}

// details returns the RetryInfo and QuotaFailure of st.
func details(t *testing.T, st *status.Status) (*errdetails.RetryInfo, *errdetails.QuotaFailure) {
	t.Helper()
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		case *errdetails.ErrorInfo:
			assert.Equal(t, strings.ToUpper(d.Metadata["cause"]), d.Reason, "the ErrorInfo's reason is its cause")
		default:
			t.Errorf("unexpected detail %T: %v", d, d)
		}
	}
	require.NotNil(t, retry, "RetryInfo")
	require.NotNil(t, quota, "QuotaFailure")
	return retry, quota
}

// TestLimitedMethodIsResourceExhausted: a method limited by the
// interceptor per metadata key admits its threshold, then answers
// ResourceExhausted with RetryInfo and a QuotaFailure about the limit's
// name, without the key anywhere; other users and other methods are not
// affected.
func TestLimitedMethodIsResourceExhausted(t *testing.T) {
	limiter := ratelimit.NewMemory(ratelimit.WithClock(fixedClock{time.Unix(1_800_000_000, 0)}))
	rule := hourly("health.check", 2)
	client := serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(limiter, checkMethod, rule, ratelimitgrpc.Metadata("x-user")),
	})
	ctx := withUser(context.Background(), secret)
	for i := range 2 {
		require.NoError(t, check(t, client, ctx, "").err, "call %d", i)
	}
	r := check(t, client, ctx, "")
	require.Equal(t, codes.ResourceExhausted, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: health.check exceeded 2 per 1h0m0s; retry after 1h0m0s", r.status.Message())
	retry, quota := details(t, r.status)
	assert.Equal(t, time.Hour, retry.GetRetryDelay().AsDuration(), "the clock stood still: the first call leaves the window in an hour")
	require.Len(t, quota.GetViolations(), 1)
	assert.Equal(t, "health.check", quota.GetViolations()[0].GetSubject())
	assert.Equal(t, int64(2), quota.GetViolations()[0].GetQuotaValue())
	assertNoKey(t, r, secret)

	assert.NoError(t, check(t, client, withUser(context.Background(), "bob"), "").err, "another key has its own limit")
	_, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	assert.NoError(t, err, "an unlimited method")
}

// TestHandlerDenialIsResourceExhausted: a denial a handler returns (as
// from a generated decorator, keyed by a request field) is converted, with
// no interceptor option, in unary and streaming handlers.
func TestHandlerDenialIsResourceExhausted(t *testing.T) {
	limiter := ratelimit.NewMemory()
	client := serve(t, &healthService{limiter: limiter, rule: hourly("store.get", 1)}, nil)
	ctx := context.Background()
	require.NoError(t, check(t, client, ctx, secret).err)
	r := check(t, client, ctx, secret)
	require.Equal(t, codes.ResourceExhausted, r.status.Code(), "%v", r.err)
	retry, quota := details(t, r.status)
	assert.Greater(t, retry.GetRetryDelay().AsDuration(), 59*time.Minute)
	assert.Equal(t, "store.get", quota.GetViolations()[0].GetSubject())
	assertNoKey(t, r, secret)

	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: secret})
	require.NoError(t, err)
	_, err = stream.Recv()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	assertNoKey(t, reply{err: err, status: st, trailer: stream.Trailer()}, secret)
}

// TestLimitedStream: a limited streaming method is checked once per
// stream, keyed by the peer's address.
func TestLimitedStream(t *testing.T) {
	keys := &keyRecorder{}
	limiter := ratelimit.NewMemory(ratelimit.WithHook(keys))
	client := serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(limiter, watchMethod, hourly("health.watch", 1), ratelimitgrpc.PeerIP()),
	})
	stream, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	res, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, res.GetStatus())

	stream, err = client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	_, quota := details(t, st)
	assert.Equal(t, "health.watch", quota.GetViolations()[0].GetSubject())
	assertNoKey(t, reply{err: err, status: st, trailer: stream.Trailer()}, "127.0.0.1")
	assert.Equal(t, []string{"127.0.0.1", "127.0.0.1"}, keys.get(), "both streams came from the loopback address")
}

// keyRecorder is a hook that records the keys of the calls decided.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) Decided(_ context.Context, req *ratelimit.Request, _ ratelimit.Decision) {
	k.mu.Lock()
	k.keys = append(k.keys, req.Key)
	k.mu.Unlock()
}

func (k *keyRecorder) Failed(context.Context, *ratelimit.Request, error) {}

func (k *keyRecorder) get() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

// TestKeyFromContext: a KeyFunc of the context keys calls by what an
// earlier interceptor stored, and a call without a key is InvalidArgument
// without the KeyFunc's error text.
func TestKeyFromContext(t *testing.T) {
	type principal struct{}
	keys := &keyRecorder{}
	limiter := ratelimit.NewMemory(ratelimit.WithHook(keys))
	byPrincipal := func(ctx context.Context) (string, error) {
		if p, ok := ctx.Value(principal{}).(string); ok {
			return p, nil
		}
		return "", errors.New("no principal for " + secret)
	}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if vs := metadata.ValueFromIncomingContext(ctx, "x-user"); len(vs) == 1 {
			ctx = context.WithValue(ctx, principal{}, "user:"+vs[0])
		}
		return handler(ctx, req)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(auth, ratelimitgrpc.UnaryServerInterceptor(
		ratelimitgrpc.Limit(limiter, checkMethod, hourly("health.check", 5), byPrincipal),
	)))
	healthpb.RegisterHealthServer(srv, &healthService{})
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)

	require.NoError(t, check(t, client, withUser(context.Background(), "ada"), "").err)
	assert.Equal(t, []string{"user:ada"}, keys.get())
	r := check(t, client, context.Background(), "")
	assert.Equal(t, codes.InvalidArgument, r.status.Code(), "%v", r.err)
	assert.NotContains(t, r.status.Message(), secret)
	assert.Len(t, keys.get(), 1, "a call without a key is not decided")

	r = check(t, serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(limiter, checkMethod, hourly("health.check", 5), ratelimitgrpc.Metadata("x-api-key")),
	}), context.Background(), "")
	assert.Equal(t, codes.InvalidArgument, r.status.Code(), "no x-api-key metadata: %v", r.err)
}

// TestOtherErrorsPassThrough: errors that are not the limiter's reach the
// client as the handler returned them.
func TestOtherErrorsPassThrough(t *testing.T) {
	ctx := context.Background()
	notFound := status.Error(codes.NotFound, "no such service")
	r := check(t, serve(t, &healthService{err: notFound}, nil), ctx, "")
	assert.Equal(t, codes.NotFound, r.status.Code())
	assert.Equal(t, "no such service", r.status.Message())

	r = check(t, serve(t, &healthService{err: errors.New("boom")}, nil), ctx, "")
	assert.Equal(t, codes.Unknown, r.status.Code())
	assert.Equal(t, "boom", r.status.Message())

	st, ok := ratelimitgrpc.Status(errors.New("boom"))
	assert.False(t, ok)
	assert.Nil(t, st)
	st, ok = ratelimitgrpc.Status(nil)
	assert.False(t, ok)
	assert.Nil(t, st)
}

// TestStatusRetryDelay: RetryInfo's delay is RetryAfter rounded up to the
// millisecond, at least 1 ms: never earlier than the limit would admit,
// never later than the next whole second.
func TestStatusRetryDelay(t *testing.T) {
	for _, tc := range []struct{ retryAfter, want time.Duration }{
		{0, time.Millisecond},
		{time.Microsecond, time.Millisecond},
		{999 * time.Microsecond, time.Millisecond},
		{time.Millisecond, time.Millisecond},
		{1001 * time.Microsecond, 2 * time.Millisecond},
		{1234567 * time.Microsecond, 1235 * time.Millisecond},
		{time.Second, time.Second},
		{time.Second + time.Microsecond, 1001 * time.Millisecond},
		{35 * 365 * 24 * time.Hour, 35 * 365 * 24 * time.Hour},
	} {
		le := &ratelimit.LimitError{Name: "n", Key: secret, RetryAfter: tc.retryAfter, Limit: ratelimit.Limit{Period: time.Minute, Threshold: 3}}
		st, ok := ratelimitgrpc.Status(fmt.Errorf("wrapped: %w", le))
		require.True(t, ok)
		assert.Equal(t, codes.ResourceExhausted, st.Code())
		retry, _ := details(t, st)
		got := retry.GetRetryDelay().AsDuration()
		assert.Equal(t, tc.want, got, "RetryAfter %s", tc.retryAfter)
		assert.GreaterOrEqual(t, got, tc.retryAfter)
		assert.LessOrEqual(t, got, max(tc.retryAfter.Truncate(time.Second)+time.Second, time.Second))
	}
}

// TestFailClosedIsUnavailable: a fail-closed limit whose Redis has died
// answers Unavailable, without the key or the Redis error; a fail-open one
// lets the call through.
func TestFailClosedIsUnavailable(t *testing.T) {
	dead, err := redistest.Start()
	require.NoError(t, err)
	dead.Stop()
	client := redis.NewClient(&redis.Options{Addr: dead.Addr, MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	limiter := redislimit.New(client)
	closed := &ratelimit.Rule{Name: "pay", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5}}, OnError: ratelimit.FailClosed}
	grpcClient := serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(limiter, checkMethod, closed, ratelimitgrpc.Metadata("x-user")),
		ratelimitgrpc.Limit(limiter, watchMethod, hourly("open", 5), nil),
	})
	ctx := withUser(context.Background(), secret)
	r := check(t, grpcClient, ctx, "")
	assert.Equal(t, codes.Unavailable, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: pay: rate limiter unavailable", r.status.Message())
	assert.Empty(t, r.status.Details())
	assertNoKey(t, r, secret)
	assertNoKey(t, r, dead.Addr)

	stream, err := grpcClient.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.NoError(t, err, "fail open")

	handlerErr := check(t, serve(t, &healthService{limiter: limiter, rule: closed}, nil), ctx, secret)
	assert.Equal(t, codes.Unavailable, handlerErr.status.Code(), "from the handler: %v", handlerErr.err)
}

// TestRedisDenial: the interceptor limits a method with the Redis limiter
// on a real server.
func TestRedisDenial(t *testing.T) {
	srv, err := redistest.Start()
	require.NoError(t, err)
	defer srv.Stop()
	rc := srv.Client()
	defer rc.Close()
	client := serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(redislimit.New(rc), checkMethod, hourly("health.check", 3), ratelimitgrpc.Metadata("x-user")),
	})
	ctx := withUser(context.Background(), secret)
	got := make([]codes.Code, 0, 4)
	for range 4 {
		got = append(got, check(t, client, ctx, "").status.Code())
	}
	assert.Equal(t, []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted}, got)
	r := check(t, client, ctx, "")
	retry, quota := details(t, r.status)
	assert.Greater(t, retry.GetRetryDelay().AsDuration(), 59*time.Minute)
	assert.LessOrEqual(t, retry.GetRetryDelay().AsDuration(), time.Hour)
	assert.Equal(t, "health.check", quota.GetViolations()[0].GetSubject())
	assertNoKey(t, r, secret)
}

// TestInvalidRuleIsInternal: a rule no limiter can decide fails its calls
// with Internal, and the last Limit given for a method applies.
func TestInvalidRuleIsInternal(t *testing.T) {
	limiter := ratelimit.NewMemory()
	invalid := &ratelimit.Rule{Name: "bad", Limits: []ratelimit.Limit{{Period: time.Hour}}}
	client := serve(t, &healthService{}, []ratelimitgrpc.Option{
		ratelimitgrpc.Limit(limiter, checkMethod, hourly("replaced", 1), nil),
		ratelimitgrpc.Limit(limiter, checkMethod, invalid, nil),
	})
	r := check(t, client, context.Background(), "")
	assert.Equal(t, codes.Internal, r.status.Code(), "%v", r.err)
	assert.Equal(t, "ratelimit: bad: the call could not be decided", r.status.Message())
}

// TestHeadersOfAdmittedCalls: with Headers, an admitted unary call's
// response header carries the RateLimit metadata of the limit with the
// fewest units left, the interceptor's or the handler's (a generated
// decorator's), and never the key; a denied call and a call without
// Headers carry none.
func TestHeadersOfAdmittedCalls(t *testing.T) {
	limiter := ratelimit.NewMemory(ratelimit.WithClock(fixedClock{time.Unix(1_800_000_000, 0)}))
	svc := &healthService{limiter: limiter, rule: hourly("store.get", 2)}
	limit := ratelimitgrpc.Limit(limiter, checkMethod, hourly("health.check", 3), ratelimitgrpc.Metadata("x-user"))
	client := serve(t, svc, []ratelimitgrpc.Option{limit, ratelimitgrpc.Headers()})
	ctx := withUser(context.Background(), "bob")

	r := check(t, client, ctx, secret)
	require.NoError(t, r.err)
	assert.Equal(t, []string{`"store.get";q=2;w=3600`}, r.header.Get("ratelimit-policy"), "1 left of store.get, 2 of health.check")
	assert.Equal(t, []string{`"store.get";r=1;t=3600`}, r.header.Get("ratelimit"))
	assertNoKey(t, r, secret)

	r = check(t, client, ctx, "another")
	require.NoError(t, r.err)
	assert.Equal(t, []string{`"store.get";r=1;t=3600`}, r.header.Get("ratelimit"), "1 left of both: the later, the handler's")
	r = check(t, client, ctx, "third")
	require.NoError(t, r.err)
	assert.Equal(t, []string{`"health.check";r=0;t=3600`}, r.header.Get("ratelimit"), "bob's third call of health.check")
	r = check(t, client, ctx, "fourth")
	require.Equal(t, codes.ResourceExhausted, r.status.Code(), "%v", r.err)
	assert.Empty(t, r.header.Get("ratelimit"), "the interceptor's denial is its status")

	r = check(t, client, withUser(context.Background(), "carol"), secret)
	require.NoError(t, r.err)
	assert.Equal(t, []string{`"store.get";r=0;t=3600`}, r.header.Get("ratelimit"))
	r = check(t, client, withUser(context.Background(), "dave"), secret)
	require.Equal(t, codes.ResourceExhausted, r.status.Code(), "%v", r.err)
	assert.Empty(t, r.header.Get("ratelimit"), "the handler's denial is its status")
	assertNoKey(t, r, secret)

	plain := serve(t, &healthService{limiter: limiter, rule: hourly("plain", 5)}, []ratelimitgrpc.Option{limit})
	r = check(t, plain, withUser(context.Background(), "erin"), "")
	require.NoError(t, r.err)
	assert.Empty(t, r.header.Get("ratelimit"), "without Headers")
}

// TestHeadersOfAdmittedStreams: with Headers, a stream's header carries
// the RateLimit metadata of the limit that admitted it, sent with its
// first message, or when its handler returns without sending one.
func TestHeadersOfAdmittedStreams(t *testing.T) {
	limiter := ratelimit.NewMemory(ratelimit.WithClock(fixedClock{time.Unix(1_800_000_000, 0)}))
	for _, silent := range []bool{false, true} {
		svc := &healthService{limiter: limiter, rule: hourly(fmt.Sprint("watch.", silent), 2), silent: silent}
		client := serve(t, svc, []ratelimitgrpc.Option{
			ratelimitgrpc.Limit(limiter, watchMethod, hourly(fmt.Sprint("health.watch.", silent), 10), ratelimitgrpc.PeerIP()),
			ratelimitgrpc.Headers(),
		})
		stream, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: secret})
		require.NoError(t, err)
		header, err := stream.Header()
		require.NoError(t, err)
		assert.Equal(t, []string{fmt.Sprintf(`"watch.%v";q=2;w=3600`, silent)}, header.Get("ratelimit-policy"), "silent=%v", silent)
		assert.Equal(t, []string{fmt.Sprintf(`"watch.%v";r=1;t=3600`, silent)}, header.Get("ratelimit"), "silent=%v", silent)
		for {
			if _, err := stream.Recv(); err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
		}
		assertNoKey(t, reply{header: header, trailer: stream.Trailer(), status: status.New(codes.OK, "")}, secret)
	}
}
