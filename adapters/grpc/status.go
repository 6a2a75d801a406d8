// Package ratelimitgrpc serves ratelimitgen's limits over gRPC: its server
// interceptors turn every error of a rate limited call into the status
// code and error details gRPC clients expect, limit methods chosen by full
// name, service or pattern, and send the RateLimit metadata of admitted
// calls; its client interceptors wait out denials.
//
// # Statuses
//
// One mapping, [Status], serves the errors that generated decorators
// return from inside handlers and the checks of the interceptors' own
// limits ([Limit], [LimitService], [LimitMatch]) alike, so one situation
// gets one status whichever path limits the call:
//
//	the call's error                          its status
//
//	denied                                    ResourceExhausted "ratelimit: <name> exceeded
//	  *ratelimit.LimitError                   <threshold> per <period>; retry after <delay>"
//	                                          (or its cause: blocked, cooling down, ...),
//	                                          RetryInfo, QuotaFailure, ErrorInfo (shaped by
//	                                          DenyStatus)
//
//	no key: "" under emptykey=deny, a nil     InvalidArgument, or MissingKeyCode's code
//	  pointer (*ratelimit.KeyError); a        (such as Unauthenticated): "ratelimit: <name>:
//	  KeyFunc's error wrapping ErrEmptyKey    the call has no rate limit key"
//	  (Metadata, PeerIP)
//
//	a key= or cost= function (a KeyFunc)      that status, unchanged: code, message, details
//	  failed with a gRPC status
//	  (*ratelimit.FuncError)
//
//	... with a rate limiting error            that error's row
//
//	... with any other error                  InvalidArgument "ratelimit: <name>: the call's
//	                                          rate limit key or cost could not be found"
//
//	a cost no limit can ever admit            InvalidArgument "ratelimit: <name>: cost 25 can
//	  *ratelimit.CostError                    never be admitted by limit 20 per 10s",
//	                                          QuotaFailure naming the limit (none for a
//	                                          negative cost)
//
//	the backend failed, fail-closed           Unavailable "ratelimit: <name>: rate limiter
//	  ErrBackend, ErrCircuitOpen              unavailable"
//
//	a rule no limiter can decide              Internal "ratelimit: <name>: the call could not
//	  other ErrInvalidLimit                   be decided"
//
//	any of these once the call's context      Canceled or DeadlineExceeded
//	  has ended
//
//	any other error of a handler              unchanged: what gRPC makes of it
//
// A denial's status has three details, as Google's API design guide
// describes: an errdetails.RetryInfo saying when to retry, an
// errdetails.QuotaFailure whose violation subject is the limit's name (the
// shared line's, when one denied the call) and an errdetails.ErrorInfo
// whose reason is the denial's cause in capitals (LIMIT, BLOCKED,
// COOLDOWN, CONCURRENCY, QUEUE, SHED; see ratelimit.LimitError.Cause). No
// status the adapter makes holds the call's key (a user id, an address),
// the Go expression of a key= or cost= directive, the text of a key or
// cost function's error or the cause of a backend failure (a Redis
// address): not in the message, the details, the headers or the trailers.
// A function's own gRPC status is the one exception, sent as the function
// made it: return one from a key or cost function (or a [KeyFunc]) to
// choose the code and message a caller sees, such as
// status.Error(codes.Unauthenticated, "missing x-api-key").
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
// service whose methods call decorated interfaces; install it outermost,
// so that it sees what the handlers return.
//
// # Upstream cooldowns
//
// A service that calls an upstream over gRPC can have the upstream's
// "retry later" cool its own limits: [UpstreamError] (or the client
// interceptor [UnaryClientUpstreamErrors]) turns a status with an
// errdetails.RetryInfo into a [RetryError], which a limited method
// returns so that its lines marked cooldown=true cool until then, in
// every process (see ratelimit.Rule.CooldownOn).
package ratelimitgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Status returns the gRPC status of an error of a rate limited call, and
// true, when err is one of the rate limiter's (see the package's table):
// a denial, a missing key, a failed key or cost function, an impossible
// cost, a backend failure or a rule no limiter can decide. For any other
// error it returns nil and false. It makes the statuses the interceptors
// make without options: a missing key is codes.InvalidArgument, and a
// denial's status is not shaped.
//
// A denial is codes.ResourceExhausted with the message
//
//	ratelimit: <name> exceeded <threshold> per <period>; retry after <delay>
//
// (or "ratelimit: <name> is blocked; retry after <delay>" for a key an
// override blocks), an errdetails.RetryInfo whose delay is the denial's
// RetryAfter rounded up to the millisecond (at least 1 ms, so it is never
// early and a client never retries in a tight loop) and an
// errdetails.QuotaFailure with one violation whose subject is the limit's
// name and whose quota value is the threshold of the limit that denied the
// call. A backend failure is codes.Unavailable with the message
// "ratelimit: <name>: rate limiter unavailable"; its cause (a Redis error)
// is not sent. No status holds the call's key.
func Status(err error) (*status.Status, bool) {
	return defaultMapping.status(context.Background(), err, "")
}

// mapping makes the statuses of rate limiting errors; the interceptors'
// options shape it.
type mapping struct {
	missingKey codes.Code
	deny       func(context.Context, *ratelimit.LimitError, *status.Status) *status.Status
}

var defaultMapping = mapping{missingKey: codes.InvalidArgument}

// status returns the status of err, an error of a call with context ctx,
// and whether err is a rate limiting error; name is the limit's name when
// err does not tell it. Once ctx has ended, the status of a rate limiting
// error is the context's.
func (m *mapping) status(ctx context.Context, err error, name string) (*status.Status, bool) {
	st, ok := m.statusOf(ctx, err, name)
	if ok {
		if cerr := ctx.Err(); cerr != nil {
			return status.FromContextError(cerr), true
		}
	}
	return st, ok
}

// statusOf is status, whatever ctx's state.
func (m *mapping) statusOf(ctx context.Context, err error, name string) (*status.Status, bool) {
	if err == nil {
		return nil, false
	}
	var (
		fe *ratelimit.FuncError
		le *ratelimit.LimitError
		ke *ratelimit.KeyError
		ce *ratelimit.CostError
		be *ratelimit.BackendError
	)
	switch {
	case errors.As(err, &fe):
		return m.funcStatus(ctx, fe.Name, fe.Err), true
	case errors.As(err, &le):
		return m.denial(ctx, le), true
	case errors.As(err, &ke):
		return m.keyStatus(ke.Name), true
	case errors.Is(err, ratelimit.ErrEmptyKey), errors.Is(err, ratelimit.ErrNilKey):
		return m.keyStatus(name), true
	case errors.As(err, &ce):
		return costStatus(ce), true
	case errors.As(err, &be):
		return backendStatus(be.Name), true
	case errors.Is(err, ratelimit.ErrBackend):
		return backendStatus(name), true
	case errors.Is(err, ratelimit.ErrInvalidLimit):
		return status.New(codes.Internal, prefix(name)+"the call could not be decided"), true
	}
	return nil, false
}

// funcStatus returns the status of a call whose key or cost function,
// of the limit named name, failed with err: the status of a rate
// limiting error, err's own gRPC status, or else InvalidArgument without
// err's text.
func (m *mapping) funcStatus(ctx context.Context, name string, err error) *status.Status {
	if st, ok := m.statusOf(ctx, err, name); ok {
		return st
	}
	if st, ok := status.FromError(err); ok && st != nil {
		return st
	}
	return status.New(codes.InvalidArgument, prefix(name)+"the call's rate limit key or cost could not be found")
}

// denial returns the status of the denial le, shaped by m.deny.
func (m *mapping) denial(ctx context.Context, le *ratelimit.LimitError) *status.Status {
	st := limitStatus(le)
	if m.deny != nil {
		if shaped := m.deny(ctx, le, st); shaped != nil && shaped.Code() != codes.OK {
			return shaped
		}
	}
	return st
}

// keyStatus returns the status of a call of the limit named name that has
// no key.
func (m *mapping) keyStatus(name string) *status.Status {
	return status.New(m.missingKey, prefix(name)+"the call has no rate limit key")
}

// prefix returns the start of a message about the limit named name.
func prefix(name string) string {
	if name == "" {
		return "ratelimit: "
	}
	return "ratelimit: " + name + ": "
}

// limitStatus describes the denial le, without its key.
func limitStatus(le *ratelimit.LimitError) *status.Status {
	delay := retryDelay(le.RetryAfter)
	per := le.Limit.Period.String()
	if le.Limit.Calendar != "" {
		per = strings.TrimSpace(le.Limit.Calendar + " " + le.Limit.TZ) // "month Europe/Paris", as Limit.String writes it
	}
	msg, desc := denialText(le, per, delay)
	subject := le.Name
	if le.Line != "" {
		subject = le.Line
	}
	st := status.New(codes.ResourceExhausted, msg)
	withDetails, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     subject,
			Description: desc,
			QuotaValue:  le.Limit.Threshold,
		}}},
		errorInfo(le),
	)
	if err != nil { // only for a status of code OK, which st is not
		return st
	}
	return withDetails
}

// denialText returns the message and the QuotaFailure description of the
// denial le, which say its cause (see ratelimit.LimitError.Cause): per is
// the limit's period as written, delay the retry.
func denialText(le *ratelimit.LimitError, per string, delay time.Duration) (msg, desc string) {
	switch le.Cause() {
	case "blocked":
		return fmt.Sprintf("ratelimit: %s is blocked; retry after %s", le.Name, delay), "blocked by an override"
	case "concurrency":
		return fmt.Sprintf("ratelimit: %s has %d calls in flight, its most; retry after %s at the latest", le.Name, le.Limit.Threshold, delay),
			fmt.Sprintf("concurrency limit %s reached", le.Limit)
	case "cooldown":
		return fmt.Sprintf("ratelimit: %s is cooling down: an upstream asked for a pause; retry after %s", le.Name, delay), "cooling down"
	case "queue":
		return fmt.Sprintf("ratelimit: %s waits its turn behind earlier calls; retry after %s", le.Name, delay), "waiting its turn"
	case "shed":
		return fmt.Sprintf("ratelimit: %s was shed undecided: the limiter is busy; retry after %s", le.Name, delay), "shed: the limiter is busy"
	}
	if le.Line != "" {
		return fmt.Sprintf("ratelimit: %s: shared line %s exceeded %d per %s; retry after %s", le.Name, le.Line, le.Limit.Threshold, per, delay),
			fmt.Sprintf("rate limit %s of shared line %s exceeded", le.Limit, le.Line)
	}
	return fmt.Sprintf("ratelimit: %s exceeded %d per %s; retry after %s", le.Name, le.Limit.Threshold, per, delay),
		fmt.Sprintf("rate limit %s exceeded", le.Limit)
}

// errorInfo is the ErrorInfo of the denial le: its reason is its cause in
// capitals (LIMIT, BLOCKED, COOLDOWN, CONCURRENCY, QUEUE, SHED), a client
// can switch on; its metadata the cause and the shared line, if one
// denied it. Never its key.
func errorInfo(le *ratelimit.LimitError) *errdetails.ErrorInfo {
	md := map[string]string{"cause": le.Cause()}
	if le.Line != "" {
		md["line"] = le.Line
	}
	return &errdetails.ErrorInfo{Reason: strings.ToUpper(le.Cause()), Domain: "ratelimitgen", Metadata: md}
}

// costStatus describes a cost no limit can admit: InvalidArgument, with a
// QuotaFailure naming the limit when the cost is too large.
func costStatus(ce *ratelimit.CostError) *status.Status {
	st := status.New(codes.InvalidArgument, ce.Error()) // names the limit, the cost and the limit's size
	if ce.Cost < 0 {
		return st
	}
	most := ce.Limit.MaxCost()
	withDetails, err := st.WithDetails(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     ce.Name,
		Description: fmt.Sprintf("cost %d exceeds the %d units rate limit %s can ever admit at once", ce.Cost, most, ce.Limit),
		QuotaValue:  most,
	}}})
	if err != nil {
		return st
	}
	return withDetails
}

// backendStatus describes a backend failure of the limit named name,
// without its cause.
func backendStatus(name string) *status.Status {
	return status.New(codes.Unavailable, prefix(name)+"rate limiter unavailable")
}

// retryDelay returns the delay of the RetryInfo of a denial whose
// RetryAfter is retryAfter: rounded up to the millisecond, at least 1 ms.
func retryDelay(retryAfter time.Duration) time.Duration {
	d := (retryAfter + time.Millisecond - 1).Truncate(time.Millisecond)
	return max(d, time.Millisecond)
}
