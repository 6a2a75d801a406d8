// Package ratelimitgrpc serves ratelimitgen's limits over gRPC: its server
// interceptors turn the runtime's denials into the status codes and error
// details gRPC clients expect, and limit whole methods by their full name.
//
// A denial (an error wrapping a [*ratelimit.LimitError]) becomes
// codes.ResourceExhausted with two details, as Google's API design guide
// describes: an errdetails.RetryInfo saying when to retry and an
// errdetails.QuotaFailure whose violation subject is the limit's name. A
// failure of a fail-closed limiter (an error wrapping [ratelimit.ErrBackend])
// becomes codes.Unavailable. The key of the call (a user id, an address) is
// never sent to the client: not in the message, the details, the headers or
// the trailers.
//
//	limiter := redislimit.New(client)
//	hello := &ratelimit.Rule{Name: "hello", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 10}}}
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(ratelimitgrpc.UnaryServerInterceptor(
//			ratelimitgrpc.Limit(limiter, "/helloworld.Greeter/SayHello", hello, ratelimitgrpc.PeerIP()),
//		)),
//		grpc.ChainStreamInterceptor(ratelimitgrpc.StreamServerInterceptor()),
//	)
//
// Errors that generated decorators return from inside the handlers are
// converted too, so an interceptor without options is enough for a
// service whose methods call decorated interfaces.
package ratelimitgrpc

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Status returns the gRPC status for a rate limiting error, and true, when
// err wraps a [*ratelimit.LimitError] or [ratelimit.ErrBackend]; for any
// other error it returns nil and false.
//
// A denial is codes.ResourceExhausted with the message
//
//	ratelimit: <name> exceeded <threshold> per <period>; retry after <delay>
//
// an errdetails.RetryInfo whose delay is the denial's RetryAfter rounded up
// to the millisecond (at least 1 ms, so it is never early and a client
// never retries in a tight loop) and an errdetails.QuotaFailure with one
// violation whose subject is the limit's name and whose quota value is the
// threshold of the limit that denied the call. A backend failure is
// codes.Unavailable with the message "ratelimit: <name>: rate limiter
// unavailable"; its cause (a Redis error) is not sent. Neither status holds
// the call's key.
func Status(err error) (*status.Status, bool) {
	var le *ratelimit.LimitError
	switch {
	case errors.As(err, &le):
		return limitStatus(le), true
	case errors.Is(err, ratelimit.ErrBackend):
		return backendStatus(err), true
	}
	return nil, false
}

// limitStatus describes the denial le, without its key.
func limitStatus(le *ratelimit.LimitError) *status.Status {
	delay := retryDelay(le.RetryAfter)
	st := status.New(codes.ResourceExhausted, fmt.Sprintf("ratelimit: %s exceeded %d per %s; retry after %s",
		le.Name, le.Limit.Threshold, le.Limit.Period, delay))
	withDetails, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     le.Name,
			Description: fmt.Sprintf("rate limit %s exceeded", le.Limit),
			QuotaValue:  le.Limit.Threshold,
		}}},
	)
	if err != nil { // only for a status of code OK, which st is not
		return st
	}
	return withDetails
}

// backendStatus describes the backend failure err without its cause.
func backendStatus(err error) *status.Status {
	var be *ratelimit.BackendError
	if errors.As(err, &be) {
		return status.Newf(codes.Unavailable, "ratelimit: %s: rate limiter unavailable", be.Name)
	}
	return status.New(codes.Unavailable, "ratelimit: rate limiter unavailable")
}

// retryDelay returns the delay of the RetryInfo of a denial whose
// RetryAfter is retryAfter: rounded up to the millisecond, at least 1 ms.
func retryDelay(retryAfter time.Duration) time.Duration {
	d := (retryAfter + time.Millisecond - 1).Truncate(time.Millisecond)
	return max(d, time.Millisecond)
}
