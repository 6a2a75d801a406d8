package ratelimitgrpc

import (
	"context"
	"net/http"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
)

// Option configures the interceptors of [UnaryServerInterceptor] and
// [StreamServerInterceptor].
type Option func(*config)

type config struct {
	methods map[string]methodLimit // full method name → its limit
	headers bool                   // send the RateLimit metadata of admitted calls
}

// methodLimit is how the calls of one method are limited.
type methodLimit struct {
	limiter ratelimit.Limiter
	rule    *ratelimit.Rule
	key     KeyFunc
}

// Limit limits the calls of the method fullMethod, as gRPC names it
// ("/package.Service/Method"): each call (each stream, for a streaming
// method) is one call of rule with cost 1 and the key that key returns
// (one shared key when key is nil), decided by limiter with
// [ratelimit.Rule.Check], so the rule's Wait, Shadow and OnError apply as
// they do to generated decorators. When a method is given more than once,
// the last Limit applies.
func Limit(limiter ratelimit.Limiter, fullMethod string, rule *ratelimit.Rule, key KeyFunc) Option {
	return func(c *config) {
		c.methods[fullMethod] = methodLimit{limiter: limiter, rule: rule, key: key}
	}
}

// Headers makes the interceptors send the "ratelimit-policy" and
// "ratelimit" header metadata on a call admitted by a limit, with the
// values httplimit.SetAdmissionHeaders gives the RateLimit-Policy and
// RateLimit fields of an HTTP response:
//
//	ratelimit-policy: "<name>";q=<threshold>;w=<period seconds>
//	ratelimit: "<name>";r=<remaining>;t=<seconds until the limit is fully available>
//
// The interceptors pass the handler a context from
// [ratelimit.WithAdmission], so the limit is that of [Limit] or of a
// generated decorator that the handler calls with the call's context (or
// a stream's Context()), whichever has the fewest units left. A unary
// call sends them with its response when it succeeds; a stream, with its
// first message or header (as the admission stood then), or when its
// handler returns nil without sending any. A call no limit admitted with
// a decision (a shadow rule's, one that went ahead on a limiter failure,
// one that failed) gets none, and neither does a call whose handler sent
// its header itself first (grpc.SendHeader with the call's context).
func Headers() Option {
	return func(c *config) { c.headers = true }
}

func newConfig(opts []Option) *config {
	c := &config{methods: make(map[string]methodLimit)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// UnaryServerInterceptor returns an interceptor that checks the limits that
// opts set on each call's method before calling its handler and converts
// rate limiting errors to gRPC statuses with [Status]: both its own
// denials and those the handler returns (from generated decorators). Other
// errors of the handler pass through unchanged.
//
// A call whose key cannot be found (a KeyFunc error) fails with
// codes.InvalidArgument, without the error's text; a call whose context
// ended while it was checked fails with the context's status (Canceled or
// DeadlineExceeded); any other error of the check (a rule no limiter can
// decide, wrapping [ratelimit.ErrInvalidLimit]) fails with codes.Internal.
func UnaryServerInterceptor(opts ...Option) grpc.UnaryServerInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var admission func() ratelimit.Admission
		if c.headers {
			ctx, admission = ratelimit.WithAdmission(ctx)
		}
		if err := c.check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		resp, err := handler(ctx, req)
		if err == nil && admission != nil {
			if md := headerOf(admission()); md != nil {
				_ = grpc.SetHeader(ctx, md) // fails only once the handler sent the header
			}
		}
		return resp, convert(err)
	}
}

// StreamServerInterceptor returns the streaming twin of
// [UnaryServerInterceptor]: a stream is checked once, before its handler
// runs, with the key read from the stream's context.
func StreamServerInterceptor(opts ...Option) grpc.StreamServerInterceptor {
	c := newConfig(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		var as *admittedStream
		if c.headers {
			as = &admittedStream{ServerStream: ss}
			as.ctx, as.admission = ratelimit.WithAdmission(ss.Context())
			ss = as
		}
		if err := c.check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		err := handler(srv, ss)
		if err == nil && as != nil {
			as.setHeader()
		}
		return convert(err)
	}
}

// admittedStream is a stream whose context records admissions, and which
// sends their header metadata before its first message or header.
type admittedStream struct {
	grpc.ServerStream
	ctx       context.Context
	admission func() ratelimit.Admission
	once      sync.Once
}

func (s *admittedStream) Context() context.Context { return s.ctx }

func (s *admittedStream) SendHeader(md metadata.MD) error {
	s.setHeader()
	return s.ServerStream.SendHeader(md)
}

func (s *admittedStream) SendMsg(m any) error {
	s.setHeader()
	return s.ServerStream.SendMsg(m)
}

// setHeader adds the metadata of the recorded admission to the stream's
// header, the first time only.
func (s *admittedStream) setHeader() {
	s.once.Do(func() {
		if md := headerOf(s.admission()); md != nil {
			_ = s.ServerStream.SetHeader(md) // fails only once the header was sent
		}
	})
}

// headerOf returns the header metadata that describes a, or nil when a is
// not Decided.
func headerOf(a ratelimit.Admission) metadata.MD {
	if !a.Decided {
		return nil
	}
	h := http.Header{}
	httplimit.SetAdmissionHeaders(h, a)
	md := metadata.MD{}
	for name, values := range h {
		md.Append(name, values...) // lower-cased by Append
	}
	return md
}

// check decides a call of method, if it is limited, and returns the status
// error of a call that may not proceed.
func (c *config) check(ctx context.Context, method string) error {
	m, ok := c.methods[method]
	if !ok {
		return nil
	}
	key := ""
	if m.key != nil {
		var err error
		if key, err = m.key(ctx); err != nil {
			return status.Error(codes.InvalidArgument, "ratelimit: the call has no rate limit key")
		}
	}
	err := m.rule.Check(ctx, m.limiter, key, 1)
	if err == nil {
		return nil
	}
	if st, ok := Status(err); ok {
		return st.Err()
	}
	if cerr := ctx.Err(); cerr != nil {
		return status.FromContextError(cerr).Err()
	}
	return status.Errorf(codes.Internal, "ratelimit: %s: the call could not be decided", m.rule.Name)
}

// convert returns the status error of a rate limiting error and any other
// error as it is.
func convert(err error) error {
	if st, ok := Status(err); ok {
		return st.Err()
	}
	return err
}
