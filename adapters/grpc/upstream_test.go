package ratelimitgrpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// withRetry returns a status error of code with a RetryInfo of delay.
func withRetry(t *testing.T, code codes.Code, delay *durationpb.Duration) error {
	t.Helper()
	st, err := status.New(code, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestUpstreamErrorReadsRetryInfo(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want time.Duration // 0: no retry time
	}{
		{"nil", nil, 0},
		{"plain", errors.New("boom"), 0},
		{"no details", status.Error(codes.ResourceExhausted, "busy"), 0},
		{"5s", withRetry(t, codes.ResourceExhausted, durationpb.New(5*time.Second)), 5 * time.Second},
		{"unavailable", withRetry(t, codes.Unavailable, durationpb.New(time.Second)), time.Second},
		{"negative", withRetry(t, codes.ResourceExhausted, durationpb.New(-time.Second)), 0},
		{"zero", withRetry(t, codes.ResourceExhausted, durationpb.New(0)), 0},
		{"nil delay", withRetry(t, codes.ResourceExhausted, nil), 0},
		{"huge", withRetry(t, codes.ResourceExhausted, &durationpb.Duration{Seconds: 315576000000}), ratelimit.MaxCooldown},
		{"invalid", withRetry(t, codes.ResourceExhausted, &durationpb.Duration{Seconds: math.MaxInt64, Nanos: -5}), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := UpstreamError(c.err)
			d, ok := retryTimeOf(fmt.Errorf("call: %w", err))
			if c.want == 0 {
				if ok || err != c.err {
					t.Fatalf("%v: %s, %t; want the error unchanged", err, d, ok)
				}
				return
			}
			if !ok || d != c.want {
				t.Fatalf("%v: %s, %t; want %s", err, d, ok, c.want)
			}
			if status.Code(err) != status.Code(c.err) {
				t.Errorf("the status reads %s through the RetryError, want %s", status.Code(err), status.Code(c.err))
			}
		})
	}
}

func TestUnaryClientUpstreamErrorsWrapsTheCallsError(t *testing.T) {
	busy := withRetry(t, codes.ResourceExhausted, durationpb.New(3*time.Second))
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return busy }
	err := UnaryClientUpstreamErrors()(context.Background(), "/x.Y/Z", nil, nil, nil, invoker)
	if d, ok := retryTimeOf(err); !ok || d != 3*time.Second {
		t.Fatalf("%v: %s, %t", err, d, ok)
	}
}

// retryTimeOf returns the retry time err carries, as the runtime reads it:
// the RetryAfter of the first error in its chain that has one, when
// positive.
func retryTimeOf(err error) (time.Duration, bool) {
	var r interface{ RetryAfter() time.Duration }
	if !errors.As(err, &r) || r.RetryAfter() <= 0 {
		return 0, false
	}
	return r.RetryAfter(), true
}
