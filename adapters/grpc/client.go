package ratelimitgrpc

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UnaryClientInterceptor returns a client interceptor that retries a unary
// call the server denied with codes.ResourceExhausted and an
// errdetails.RetryInfo (as [Status] makes): it waits the RetryInfo's delay,
// plus up to a tenth more of jitter so that denied clients do not all come
// back at once, and calls again, making at most maxAttempts attempts in all
// (values below 1 mean 1). A denial whose delay would end past the call's
// deadline, a denial without RetryInfo and any other error are returned at
// once, as is the last denial; if the call's context ends while it waits,
// the call returns the context's status. A call without a deadline waits
// as long as the server says, so give calls deadlines.
func UnaryClientInterceptor(maxAttempts int) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || attempt >= maxAttempts {
				return err
			}
			delay, ok := retryAfter(ctx, err)
			if !ok {
				return err
			}
			if err := sleep(ctx, delay); err != nil {
				return status.FromContextError(err).Err()
			}
		}
	}
}

// retryAfter returns how long to wait before retrying a call that failed
// with err, and whether to retry at all: only a ResourceExhausted status
// with a RetryInfo whose delay ends before ctx's deadline is retried.
func retryAfter(ctx context.Context, err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.RetryInfo)
		if !ok || info.GetRetryDelay() == nil {
			continue
		}
		delay := info.GetRetryDelay().AsDuration()
		if delay < 0 {
			return 0, false
		}
		wait := delay + rand.N(delay/10+1)
		if deadline, ok := ctx.Deadline(); ok {
			left := time.Until(deadline)
			if delay >= left {
				return 0, false
			}
			if wait >= left {
				wait = delay
			}
		}
		return wait, true
	}
	return 0, false
}

// sleep waits for d or until ctx ends, returning ctx's error if it ends
// first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
