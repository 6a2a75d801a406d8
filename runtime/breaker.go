package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The circuit breaker defaults of [NewRedis]; see [WithBreaker].
const (
	// DefaultBreakerFailures is how many consecutive failed calls open the
	// breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerBackoff is how long the breaker first stays open.
	DefaultBreakerBackoff = time.Second
	// DefaultBreakerMaxBackoff bounds how long the breaker stays open as
	// its back-off doubles.
	DefaultBreakerMaxBackoff = 30 * time.Second
)

type breakerConfig struct {
	failures            int
	backoff, maxBackoff time.Duration
}

// WithBreaker tunes the circuit breaker of a [RedisLimiter]: after failures
// consecutive calls failed because Redis was unreachable or unavailable,
// the limiter stops sending commands for backoff and fails every call at
// once with a [*BackendError] wrapping [ErrCircuitOpen], so the rule's
// [ErrorPolicy] applies without waiting for the client's timeouts. When the
// back-off has passed, one call is let through as a probe: if it succeeds
// the breaker closes, otherwise it opens again for twice as long, up to
// maxBackoff. The defaults are [DefaultBreakerFailures],
// [DefaultBreakerBackoff] and [DefaultBreakerMaxBackoff]; failures <= 0
// turns the breaker off, and a non-positive duration keeps its default.
// The memory limiter ignores it. With a Redis Cluster client each master
// has a breaker of its own, so a master that is down fails only the calls
// whose keys it holds.
//
// Only failures of the connection (refused, reset, timed out, pool
// exhausted) and replies saying the server cannot serve (CLUSTERDOWN,
// LOADING, MASTERDOWN, TRYAGAIN, READONLY, BUSY) count. A call whose
// context ended counts neither way: the caller gave up, Redis may be fine.
func WithBreaker(failures int, backoff, maxBackoff time.Duration) Option {
	return func(c *config) {
		c.breaker.failures = failures
		if backoff > 0 {
			c.breaker.backoff = backoff
		}
		if maxBackoff > 0 {
			c.breaker.maxBackoff = maxBackoff
		}
	}
}

// breaker is a consecutive-failure circuit breaker. Its closed path is two
// atomic loads.
type breaker struct {
	cfg breakerConfig
	now func() time.Time

	failures  atomic.Int64 // consecutive failures while closed
	openUntil atomic.Int64 // Unix ns until which calls fail at once; 0: closed
	probing   atomic.Bool  // the half-open probe is in flight

	mu      sync.Mutex
	backoff time.Duration // how long the breaker stays open next time
}

// newBreaker returns the breaker for cfg, or nil when it is turned off.
func newBreaker(cfg breakerConfig) *breaker {
	if cfg.failures <= 0 {
		return nil
	}
	cfg.maxBackoff = max(cfg.maxBackoff, cfg.backoff)
	return &breaker{cfg: cfg, now: time.Now, backoff: cfg.backoff}
}

// allow reports whether a call may go to Redis, and whether it is the one
// probe let through once the back-off has passed.
func (b *breaker) allow() (ok, probe bool) {
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	if b.now().UnixNano() < until {
		return false, false
	}
	if b.probing.CompareAndSwap(false, true) {
		return true, true
	}
	return false, false
}

// open reports whether calls fail at once now.
func (b *breaker) open() bool {
	until := b.openUntil.Load()
	return until != 0 && (b.now().UnixNano() < until || b.probing.Load())
}

// succeeded closes the breaker: Redis answered.
func (b *breaker) succeeded() {
	if b.openUntil.Load() == 0 && b.failures.Load() == 0 {
		return
	}
	b.mu.Lock()
	b.failures.Store(0)
	b.openUntil.Store(0)
	b.backoff = b.cfg.backoff
	b.probing.Store(false)
	b.mu.Unlock()
}

// failed counts a failure and opens the breaker after enough of them; a
// failed probe opens it again for twice as long.
func (b *breaker) failed(probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.backoff = min(2*b.backoff, b.cfg.maxBackoff)
		b.openUntil.Store(b.now().Add(b.backoff).UnixNano())
		b.probing.Store(false)
		return
	}
	if b.openUntil.Load() != 0 {
		return // a call sent before the breaker opened
	}
	if b.failures.Add(1) >= int64(b.cfg.failures) {
		b.backoff = b.cfg.backoff
		b.openUntil.Store(b.now().Add(b.backoff).UnixNano())
	}
}

// abandoned releases the probe of a call that says nothing about Redis.
func (b *breaker) abandoned(probe bool) {
	if probe {
		b.probing.Store(false)
	}
}

// record feeds the outcome of a call sent to Redis to the breaker.
func (b *breaker) record(ctx context.Context, probe bool, err error) {
	switch {
	case err == nil:
		b.succeeded()
	case ctx.Err() != nil:
		b.abandoned(probe)
	case redisUnavailable(err):
		b.failed(probe)
	default: // Redis answered, with an error about this call only
		b.succeeded()
	}
}

// unavailableReplies start the error replies of a server that cannot serve
// any call now.
var unavailableReplies = []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN", "READONLY", "BUSY"}

// redisUnavailable reports whether err means Redis could not be reached or
// cannot serve, rather than that it rejected this one call.
func redisUnavailable(err error) bool {
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		for _, p := range unavailableReplies {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	var malformed *replyError
	return !errors.As(err, &malformed)
}

// replyError is a reply of the decide script that is not what it returns.
type replyError struct{ n int }

// Error says how many values came back.
func (e *replyError) Error() string {
	return "decide script returned a malformed reply of " + strconv.Itoa(e.n) + " values"
}
