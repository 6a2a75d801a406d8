package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
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

	pb "github.com/ratelimitgen/ratelimitgen/examples/grpcservice/quotepb"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main() // the program itself, for TestDeadRedis
		os.Exit(0)
	}
	redistest.Main(m, &srv)
}

// runMainEnv makes the test binary run the program instead of the tests.
const runMainEnv = "GRPCSERVICE_RUN_MAIN"

// eachBackend runs f once with the in-process limiter and once with a
// limiter on the test's real Redis server, each with no calls seen.
func eachBackend(t *testing.T, f func(t *testing.T, limiter ratelimit.Limiter)) {
	t.Run("memory", func(t *testing.T) { f(t, ratelimit.NewMemory()) })
	t.Run("redis", func(t *testing.T) {
		srv.Flush(t)
		client := srv.Client()
		t.Cleanup(func() { client.Close() })
		f(t, redislimit.New(client))
	})
}

// serve runs the service on a real gRPC server on a free loopback port and
// returns its address.
func serve(t *testing.T, limiter ratelimit.Limiter) string {
	t.Helper()
	s := newServer(limiter)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// dial returns a real client of the service at addr.
func dial(t *testing.T, addr string) pb.QuotesClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return pb.NewQuotesClient(conn)
}

// requireDenial checks that err is the status of a denial of the limit
// name with the given threshold and period, whose RetryInfo delay is
// positive and at most the period, and that neither the status nor the
// call's headers and trailers hold the caller's key.
func requireDenial(t *testing.T, err error, name string, threshold int64, period time.Duration, key string, md ...metadata.MD) {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "a status: %v", err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		}
	}
	require.NotNil(t, retry, "RetryInfo in %v", st.Details())
	delay := retry.GetRetryDelay().AsDuration()
	assert.Positive(t, delay)
	assert.LessOrEqual(t, delay, period)
	require.NotNil(t, quota, "QuotaFailure in %v", st.Details())
	require.Len(t, quota.GetViolations(), 1)
	assert.Equal(t, name, quota.GetViolations()[0].GetSubject())
	assert.Equal(t, threshold, quota.GetViolations()[0].GetQuotaValue())

	wire, merr := proto.Marshal(st.Proto())
	require.NoError(t, merr)
	assert.NotContains(t, string(wire), key, "the key is not in the status")
	for _, m := range md {
		for k, vs := range m {
			for _, v := range vs {
				assert.NotContains(t, k+": "+v, key, "the key is not in the headers or trailers")
			}
		}
	}
}

func TestGetIsLimitedPerCaller(t *testing.T) {
	eachBackend(t, func(t *testing.T, limiter ratelimit.Limiter) {
		client := dial(t, serve(t, limiter))
		ctx := context.Background()
		for range 3 {
			quote, err := client.Get(as(ctx, "alice"), &pb.GetRequest{})
			require.NoError(t, err)
			require.Equal(t, collection[0].GetText(), quote.GetText())
		}
		var header, trailer metadata.MD
		_, err := client.Get(as(ctx, "alice"), &pb.GetRequest{}, grpc.Header(&header), grpc.Trailer(&trailer))
		requireDenial(t, err, "quotes.get", 3, 10*time.Second, "alice", header, trailer)

		_, err = client.Get(as(ctx, "bob"), &pb.GetRequest{})
		require.NoError(t, err, "another caller has a limit of its own")

		_, err = client.Get(ctx, &pb.GetRequest{})
		require.Equal(t, codes.Unauthenticated, status.Code(err), "a call that names nobody: %v", err)
	})
}

func TestListIsLimitedPerCaller(t *testing.T) {
	eachBackend(t, func(t *testing.T, limiter ratelimit.Limiter) {
		client := dial(t, serve(t, limiter))
		ctx := as(context.Background(), "alice")
		quotes, err := list(ctx, client, 4)
		require.NoError(t, err)
		require.Len(t, quotes, 4)
		require.Equal(t, collection[0].GetText(), quotes[3].GetText(), "the stream cycles through the collection")

		stream, err := client.List(ctx, &pb.ListRequest{Count: 1})
		require.NoError(t, err)
		_, err = stream.Recv()
		requireDenial(t, err, "quotes.list", 1, time.Minute, "alice", stream.Trailer())

		quotes, err = list(as(context.Background(), "bob"), client, 1)
		require.NoError(t, err, "another caller has a limit of its own")
		require.Len(t, quotes, 1)

		_, err = list(context.Background(), client, 1)
		require.Equal(t, codes.Unauthenticated, status.Code(err), "a stream that names nobody: %v", err)
	})
}

// TestDemo runs the demo against a real server and checks what it prints,
// the sample output of docs/grpc.md, on both backends.
func TestDemo(t *testing.T) {
	eachBackend(t, func(t *testing.T, limiter ratelimit.Limiter) {
		var out bytes.Buffer
		require.NoError(t, runDemo(context.Background(), &out, serve(t, limiter)))
		for _, line := range []string{
			`Get #3 as alice: OK "Clear is better than clever." (Rob Pike)`,
			`Get #4 as alice: ResourceExhausted: ratelimit: quotes.get exceeded 3 per 10s; retry after `,
			`  QuotaFailure: subject="quotes.get" description="rate limit 3/10s (sliding_log) exceeded" quota_value=3`,
			`Get as bob: OK "Clear is better than clever." (Rob Pike)`,
			`List #1 as alice: OK 2 quotations`,
			`List #2 as alice: ResourceExhausted: ratelimit: quotes.list exceeded 1 per 1m0s; retry after `,
			`  QuotaFailure: subject="quotes.list" description="rate limit 1/1m0s (sliding_log) exceeded" quota_value=1`,
			`Get without x-user: Unauthenticated: missing x-user metadata`,
		} {
			assert.Contains(t, out.String(), line)
		}
		assert.Equal(t, 2, strings.Count(out.String(), "  RetryInfo: retry_delay="))
		assert.NotContains(t, out.String(), `"alice"`, "no status holds the key")
	})
}

// TestDeadRedis runs the demo program against a Redis that is gone: every
// call is decided in process against the same limits (the default), and
// stderr says so twice, not
// once per call: the start-up health check and the breaker's opening
// (go-redis's dial errors do not reach it).
func TestDeadRedis(t *testing.T) {
	dead, err := redistest.Start()
	require.NoError(t, err)
	dead.Stop()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-demo")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "REDIS_URL=redis://"+dead.Addr+"/0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr:\n%s", stderr.String())
	// The limits hold by default: decided in process, as Redis would.
	assert.Contains(t, stdout.String(), `Get #3 as alice: OK "Clear is better than clever." (Rob Pike)`+"\n")
	assert.Contains(t, stdout.String(), "Get #4 as alice: ResourceExhausted: ratelimit: quotes.get exceeded 3 per 10s")
	assert.Contains(t, stdout.String(), "List #2 as alice: ResourceExhausted: ratelimit: quotes.list exceeded 1 per 1m0s")
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Len(t, lines, 2, stderr.String())
	assert.Contains(t, lines[0], "WARNING: ratelimit: health check")
	assert.Contains(t, lines[1], "WARN ratelimit: circuit open")
}
