package ratelimitgrpc

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
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

// StreamClientInterceptor returns the streaming twin of
// [UnaryClientInterceptor], for server-streaming calls: a stream the
// server denied before sending anything (codes.ResourceExhausted with an
// errdetails.RetryInfo, as [StreamServerInterceptor] answers a denied
// stream) is opened again once the RetryInfo's delay, plus up to a tenth
// more of jitter, has passed, and its request is sent again, making at
// most maxAttempts attempts in all (values below 1 mean 1). The waiting
// happens in the stream's first Recv (RecvMsg), which returns the first
// message of the attempt that was admitted, or in its Header, which
// returns that attempt's header. A denial whose delay would end past the
// call's deadline, a denial without RetryInfo, any other error and the
// last denial are returned at once (by Recv, as gRPC's Header leaves
// errors to it); if the call's context ends while it waits, Recv returns
// the context's status. A stream that has received a message or a header
// is never opened again. Client-streaming and bidirectional calls pass
// through as they are: their messages are not kept to send again. Give
// calls deadlines: a call without one waits as long as the server says.
func StreamClientInterceptor(maxAttempts int) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || maxAttempts <= 1 || desc.ClientStreams {
			return cs, err
		}
		return &retryingStream{
			cs:   cs,
			ctx:  ctx,
			left: maxAttempts - 1,
			open: func() (grpc.ClientStream, error) { return streamer(ctx, desc, cc, method, opts...) },
		}, nil
	}
}

// retryingStream is a server-streaming client stream that opens itself
// again when it is denied before its first message.
type retryingStream struct {
	ctx  context.Context
	open func() (grpc.ClientStream, error)

	mu       sync.Mutex
	cs       grpc.ClientStream // the current attempt
	left     int               // attempts left
	req      any               // the request sent, to send again
	sent     bool              // SendMsg was called
	closed   bool              // CloseSend was called
	received bool              // a message or the header reached the caller: no more retries
	failed   error             // why waiting or opening the next attempt failed
}

func (s *retryingStream) current() grpc.ClientStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

func (s *retryingStream) Context() context.Context { return s.current().Context() }
func (s *retryingStream) Trailer() metadata.MD     { return s.current().Trailer() }

func (s *retryingStream) Header() (metadata.MD, error) {
	for {
		cs := s.current()
		md, err := cs.Header()
		if md != nil || err != nil {
			if md != nil {
				s.mu.Lock()
				s.received = true
				s.mu.Unlock()
			}
			return md, err
		}
		// The attempt ended without a header, so without a message:
		// learn how, taking nothing from the caller, and wait out a
		// denial. Otherwise RecvMsg returns how it ended, as gRPC's
		// Header leaves it to.
		if !s.retry(cs.RecvMsg(new(emptypb.Empty))) {
			return nil, nil
		}
	}
}

func (s *retryingStream) SendMsg(m any) error {
	s.mu.Lock()
	s.sent = true
	s.req = m
	if pm, ok := m.(proto.Message); ok {
		s.req = proto.Clone(pm) // the caller may reuse m once SendMsg returns
	}
	cs := s.cs
	s.mu.Unlock()
	return cs.SendMsg(m)
}

func (s *retryingStream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	cs := s.cs
	s.mu.Unlock()
	return cs.CloseSend()
}

func (s *retryingStream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		cs, failed := s.cs, s.failed
		s.mu.Unlock()
		if failed != nil {
			return failed
		}
		err := cs.RecvMsg(m)
		if err == nil {
			s.mu.Lock()
			s.received = true
			s.mu.Unlock()
			return nil
		}
		if !s.retry(err) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.failed != nil {
				return s.failed
			}
			return err
		}
	}
}

// retry waits out the denial err of the current attempt and opens the
// next, reporting whether it did. When waiting or opening fails, the
// stream's RecvMsg returns why from then on.
func (s *retryingStream) retry(err error) bool {
	s.mu.Lock()
	ok := !s.received && s.left > 0 && s.failed == nil
	s.mu.Unlock()
	if !ok {
		return false
	}
	delay, ok := retryAfter(s.ctx, err)
	if !ok {
		return false
	}
	if err := sleep(s.ctx, delay); err != nil {
		s.fail(status.FromContextError(err).Err())
		return false
	}
	if err := s.reopen(); err != nil {
		s.fail(err)
		return false
	}
	return true
}

func (s *retryingStream) fail(err error) {
	s.mu.Lock()
	s.failed = err
	s.mu.Unlock()
}

// reopen opens the next attempt and sends it what the caller sent.
func (s *retryingStream) reopen() error {
	cs, err := s.open()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left--
	s.cs = cs
	if s.sent {
		if err := cs.SendMsg(s.req); err != nil {
			return nil // the stream's RecvMsg tells why
		}
	}
	if s.closed {
		_ = cs.CloseSend() // never fails: its errors come from RecvMsg
	}
	return nil
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
