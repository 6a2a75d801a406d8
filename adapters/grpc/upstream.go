package ratelimitgrpc

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// RetryError is an upstream's gRPC error whose status carries an
// errdetails.RetryInfo: its RetryAfter method makes it an error that cools
// a line marked cooldown=true when a limited method returns it. It wraps the upstream's error, so status.FromError
// and status.Code still read the upstream's status through it.
type RetryError struct {
	// Err is the upstream's error.
	Err error
	// After is the RetryInfo's delay, at most ratelimit.MaxCooldown.
	After time.Duration
}

func (e *RetryError) Error() string { return e.Err.Error() }

// Unwrap returns the upstream's error.
func (e *RetryError) Unwrap() error { return e.Err }

// RetryAfter returns how long the upstream asked to wait.
func (e *RetryError) RetryAfter() time.Duration { return e.After }

// UpstreamError returns err as a *RetryError when it is a gRPC status
// (whatever its code) with an errdetails.RetryInfo whose delay is
// positive, capped at ratelimit.MaxCooldown; else err as it is. A
// RetryInfo without a delay, with a negative one or with one that is not
// a valid duration is no retry time.
func UpstreamError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.RetryInfo)
		if !ok || info.GetRetryDelay() == nil || info.GetRetryDelay().CheckValid() != nil {
			continue
		}
		if delay := info.GetRetryDelay().AsDuration(); delay > 0 {
			return &RetryError{Err: err, After: min(delay, ratelimit.MaxCooldown)}
		}
	}
	return err
}

// UnaryClientUpstreamErrors returns a client interceptor that turns the
// error of a call whose status carries a RetryInfo into a *RetryError
// (see [UpstreamError]): a limited method that returns a call's error
// through it cools its lines marked cooldown=true for the upstream's
// delay.
func UnaryClientUpstreamErrors() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return UpstreamError(invoker(ctx, method, req, reply, cc, opts...))
	}
}
