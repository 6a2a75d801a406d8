package ratelimitgrpc

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
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
	methods  map[string]*methodLimit // full method name → its limit
	services map[string]*methodLimit // service name → the limit of its methods
	patterns []patternLimit          // in the order given
	headers  bool                    // send the RateLimit metadata of admitted calls
	mapping  mapping                 // makes the statuses of rate limiting errors
}

// methodLimit is how the calls of one method are limited; a nil rule
// exempts them.
type methodLimit struct {
	limiter ratelimit.Limiter
	rule    *ratelimit.Rule
	key     KeyFunc
}

// patternLimit is the limit of the methods whose full name matches
// pattern.
type patternLimit struct {
	pattern string
	limit   *methodLimit
}

// Limit limits the calls of the method fullMethod, as gRPC names it
// ("/package.Service/Method"): each call (each stream, for a streaming
// method) is one call of rule with cost 1 and the key that key returns
// (one shared key when key is nil), decided by limiter with
// [ratelimit.Rule.Check], so the rule's Wait, Shadow and OnError apply as
// they do to generated decorators. A nil rule exempts the method from the
// limits of [LimitService] and [LimitMatch]. When a method is given more
// than once, the last Limit applies.
//
// A method's own Limit applies before its service's [LimitService], which
// applies before any [LimitMatch]; a call is checked against one rule
// only. Errors of key, and of the check, become statuses as the package's
// table says: a key missing from the call (an error wrapping
// [ratelimit.ErrEmptyKey], as [Metadata] and [PeerIP] return) is a
// missing key, a gRPC status key returns is the call's status as it is,
// and any other error of key is codes.InvalidArgument without its text.
func Limit(limiter ratelimit.Limiter, fullMethod string, rule *ratelimit.Rule, key KeyFunc) Option {
	return func(c *config) {
		c.methods[fullMethod] = &methodLimit{limiter: limiter, rule: rule, key: key}
	}
}

// LimitService limits the calls of every method of service, named as in
// its descriptor ("package.Service", such as "helloworld.Greeter"; a
// leading or trailing '/' is ignored), as [Limit] limits one method's.
// Its methods share rule: a caller's calls of all of them count against
// one limit of the rule's name and the caller's key. A method's own
// [Limit] takes its place; when a service is given more than once, the
// last LimitService applies.
func LimitService(limiter ratelimit.Limiter, service string, rule *ratelimit.Rule, key KeyFunc) Option {
	service = strings.Trim(service, "/")
	return func(c *config) {
		c.services[service] = &methodLimit{limiter: limiter, rule: rule, key: key}
	}
}

// LimitMatch limits the calls of every method whose full name
// ("/package.Service/Method") matches pattern, with the syntax of
// [path.Match], as [Limit] limits one method's: "/search.*/*" matches
// every method of the services of package search, "/*/List*" every
// method whose name starts with List, "/*/*" every method. The methods it
// matches share rule, as those of [LimitService] do. A method's [Limit]
// and its service's [LimitService] take its place; of the patterns that
// match a method, the one given last applies. LimitMatch panics if
// pattern is malformed.
func LimitMatch(limiter ratelimit.Limiter, pattern string, rule *ratelimit.Rule, key KeyFunc) Option {
	if _, err := path.Match(pattern, ""); err != nil {
		panic(fmt.Sprintf("ratelimitgrpc: LimitMatch(%q): %v", pattern, err))
	}
	return func(c *config) {
		c.patterns = append(c.patterns, patternLimit{pattern: pattern, limit: &methodLimit{limiter: limiter, rule: rule, key: key}})
	}
}

// MissingKeyCode sets the status code of a call that has no rate limit
// key (see the package's table): codes.InvalidArgument unless set.
// codes.Unauthenticated suits a service whose keys are the callers'
// identities, so that a caller without credentials learns it should
// present them. The code applies to the interceptors' limits and to the
// errors generated decorators return alike; codes.OK is ignored.
func MissingKeyCode(code codes.Code) Option {
	return func(c *config) {
		if code != codes.OK {
			c.mapping.missingKey = code
		}
	}
}

// DenyStatus makes the interceptors answer a denial with the status deny
// returns, given the call's context, the denial and the status [Status]
// makes of it (ResourceExhausted with RetryInfo and QuotaFailure), such
// as to add an errdetails.Help or errdetails.ErrorInfo, localise the
// message or choose another code. It shapes the interceptors' own denials
// and those generated decorators return from handlers. A nil status, or
// one of codes.OK, keeps st. The denial's Key is the call's: what deny
// puts in the status reaches the client. The client interceptors retry
// only a ResourceExhausted status with a RetryInfo.
func DenyStatus(deny func(ctx context.Context, denial *ratelimit.LimitError, st *status.Status) *status.Status) Option {
	return func(c *config) { c.mapping.deny = deny }
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
	c := &config{
		methods:  make(map[string]*methodLimit),
		services: make(map[string]*methodLimit),
		mapping:  defaultMapping,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// UnaryServerInterceptor returns an interceptor that checks the limit
// that opts set on each call's method before calling its handler and
// converts rate limiting errors to gRPC statuses as the package's table
// says: both those of its own check and those the handler returns (from
// generated decorators). Other errors of the handler pass through
// unchanged. A rule with a concurrency limit (see ratelimit.Rule.Reserve)
// holds one of its slots while the handler runs, panics included; a call
// that finds none free is ResourceExhausted, as a rate denial is.
func UnaryServerInterceptor(opts ...Option) grpc.UnaryServerInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var admission func() ratelimit.Admission
		if c.headers {
			ctx, admission = ratelimit.WithAdmission(ctx)
		}
		release, err := c.check(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer release()
		resp, err := handler(ctx, req)
		if err == nil && admission != nil {
			if md := headerOf(admission()); md != nil {
				_ = grpc.SetHeader(ctx, md) // fails only once the handler sent the header
			}
		}
		return resp, c.convert(ctx, err)
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
		release, err := c.check(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		defer release()
		err = handler(srv, ss)
		if err == nil && as != nil {
			as.setHeader()
		}
		return c.convert(ss.Context(), err)
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

// limitOf returns the limit of the calls of method, nil if none.
func (c *config) limitOf(method string) *methodLimit {
	if m, ok := c.methods[method]; ok {
		return m
	}
	if len(c.services) > 0 {
		if i := strings.LastIndexByte(method, '/'); i > 0 {
			if m, ok := c.services[strings.TrimPrefix(method[:i], "/")]; ok {
				return m
			}
		}
	}
	for i := len(c.patterns) - 1; i >= 0; i-- {
		if ok, _ := path.Match(c.patterns[i].pattern, method); ok {
			return c.patterns[i].limit
		}
	}
	return nil
}

// check decides a call of method, if it is limited, and returns the status
// error of a call that may not proceed.
func (c *config) check(ctx context.Context, method string) (release func(), err error) {
	release = func() {}
	m := c.limitOf(method)
	if m == nil || m.rule == nil {
		return release, nil
	}
	key := ""
	if m.key != nil {
		var err error
		if key, err = m.key(ctx); err != nil {
			// The status of a generated decorator's failed key function.
			st, _ := c.mapping.status(ctx, &ratelimit.FuncError{Name: m.rule.Name, Err: err}, m.rule.Name)
			return release, st.Err()
		}
	}
	if holdsSlot(m.rule) {
		var res *ratelimit.Reservation
		if res, err = m.rule.Reserve(ctx, m.limiter, 1, key); err == nil {
			release = func() { _ = res.Release(ctx) }
		}
	} else {
		err = m.rule.Check(ctx, m.limiter, 1, key)
	}
	if err == nil {
		return release, nil
	}
	if st, ok := c.mapping.status(ctx, err, m.rule.Name); ok {
		return release, st.Err()
	}
	if cerr := ctx.Err(); cerr != nil {
		return release, status.FromContextError(cerr).Err()
	}
	return release, status.Errorf(codes.Internal, "ratelimit: %s: the call could not be decided", m.rule.Name)
}

// holdsSlot reports whether rule has a concurrency limit (see
// ratelimit.Rule.Reserve): a call holds one of its slots while its handler
// runs, panics included.
func holdsSlot(rule *ratelimit.Rule) bool {
	for _, l := range rule.Limits {
		if l.Algorithm == "concurrency" {
			return true
		}
	}
	return false
}

// convert returns the status error of a rate limiting error of a call
// with context ctx, and any other error as it is.
func (c *config) convert(ctx context.Context, err error) error {
	if st, ok := c.mapping.status(ctx, err, ""); ok {
		return st.Err()
	}
	return err
}
