package redislimit

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The circuit breaker defaults of [New]; see [WithBreaker].
const (
	// DefaultBreakerFailures is how many consecutive failed calls open the
	// breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerBackoff is how long an open breaker waits before it
	// first asks Redis whether it is back, and between such probes.
	DefaultBreakerBackoff = 150 * time.Millisecond
	// DefaultBreakerMaxBackoff bounds the wait between probes as it
	// doubles. It equals [DefaultBreakerBackoff]: by default the wait does
	// not grow, so Redis decides again within about 150ms of its return
	// however long it was away.
	DefaultBreakerMaxBackoff = DefaultBreakerBackoff
)

// stragglerWait is how long after a breaker closed the charges of the
// fallback's last decisions are carried back; recoverTimeout bounds the
// carry-back a probe runs before the breaker closes.
const (
	stragglerWait  = 50 * time.Millisecond
	recoverTimeout = 10 * time.Second
)

type breakerConfig struct {
	failures            int
	backoff, maxBackoff time.Duration
}

// WithBreaker tunes the circuit breaker of a [Limiter]: after failures
// consecutive calls failed because Redis was unreachable or unavailable,
// the breaker opens, and the limiter stops sending the calls' commands and
// fails every call at once with a [*ratelimit.BackendError] wrapping
// [ratelimit.ErrCircuitOpen], so the rule's [ratelimit.ErrorPolicy] applies without waiting for
// the client's timeouts. While it is open, one goroutine of the breaker
// asks Redis whether it is back with a probe (a trivial script, EVAL
// "return 1", on a connection of its own), backoff after the breaker
// opened and then backoff after each probe began (or when it ended, if it
// took longer); each failed probe doubles that wait, up to maxBackoff.
// The first probe that Redis answers closes the breaker (so does a call
// sent before it opened that Redis answers late), and the goroutine ends.
// Calls never probe: an open breaker sends Redis at most one probe per
// backoff, however many calls it refuses.
//
// The defaults are [DefaultBreakerFailures], [DefaultBreakerBackoff] and
// [DefaultBreakerMaxBackoff] (at most about 7 probes a second per breaker,
// and Redis decides again within 150ms of its return, plus the probe's
// round trip); failures <= 0 turns the breaker off, and a non-positive
// duration keeps its default. With
// a Redis Cluster client each master has a breaker (and a probe) of its
// own, so a master that is down fails only the calls whose keys it holds.
// A probe stops when the client or the limiter ([Limiter.Close]) is
// closed.
//
// Only failures of the connection (refused, reset, timed out, pool
// exhausted) and replies saying the server cannot serve (CLUSTERDOWN,
// LOADING, MASTERDOWN, TRYAGAIN, READONLY, BUSY) count. A call whose
// context ended counts neither way: the caller gave up, Redis may be fine.
// A [ratelimit.Hook] that implements [ratelimit.BreakerHook] is told when
// a breaker opens and closes; without one, the opening is logged at Warn
// and the closing at Info to slog.Default(), so an outage says so once.
func WithBreaker(failures int, backoff, maxBackoff time.Duration) Option {
	return option(func(s *settings) {
		s.breaker.failures = failures
		if backoff > 0 {
			s.breaker.backoff = backoff
		}
		if maxBackoff > 0 {
			s.breaker.maxBackoff = maxBackoff
		}
	})
}

// breaker is a consecutive-failure circuit breaker with a background
// probe. Its closed path is one or two atomic loads.
type breaker struct {
	cfg  breakerConfig
	node string
	// ask asks Redis whether it can serve; hook may be nil.
	ask  func(context.Context) error
	hook ratelimit.BreakerHook
	// recover, if set, is run by the probe that finds Redis back, before
	// the breaker closes, and on a goroutine of its own once it closed
	// (see [Limiter.carryOut]).
	recover func(context.Context)
	// holdOpen, if set, reports whether a call that Redis answered late
	// must leave the breaker open for the probe to close, after recover.
	holdOpen func() bool
	// bg runs the probe and the carry-back after closing, until the
	// limiter is closed; nil runs them on plain goroutines.
	bg *background
	// now and after tell the time and wait; tests replace them.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	failures atomic.Int64 // consecutive failures while closed
	isOpen   atomic.Bool

	mu       sync.Mutex
	openedAt time.Time
	// stop is closed when the breaker closes; it tells the probe of the
	// current opening (the only one that may close it) to end.
	stop chan struct{}
}

// newBreaker returns the breaker for cfg guarding node, which ask probes,
// or nil when it is turned off.
func newBreaker(cfg breakerConfig, node string, ask func(context.Context) error, hook ratelimit.BreakerHook) *breaker {
	if cfg.failures <= 0 {
		return nil
	}
	cfg.maxBackoff = max(cfg.maxBackoff, cfg.backoff)
	return &breaker{cfg: cfg, node: node, ask: ask, hook: hook, now: time.Now, after: time.After}
}

// allow reports whether a call may go to Redis: whether the breaker is
// closed.
func (b *breaker) allow() bool { return !b.isOpen.Load() }

// open reports whether calls fail at once now.
func (b *breaker) open() bool { return b.isOpen.Load() }

// openSince returns when the breaker opened, and whether it is open.
func (b *breaker) openSince() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openedAt, b.isOpen.Load()
}

// succeeded closes the breaker: Redis answered.
func (b *breaker) succeeded() {
	if !b.isOpen.Load() && b.failures.Load() == 0 {
		return
	}
	b.mu.Lock()
	b.failures.Store(0)
	if !b.isOpen.Load() || (b.holdOpen != nil && b.holdOpen()) {
		// Closed; or open with charges to carry back first, which the
		// probe does when it finds Redis back, within a backoff.
		b.mu.Unlock()
		return
	}
	b.closeLocked()
}

// closeLocked closes the open breaker, ends its probe and tells the hook.
// It is called with b.mu held, which keeps the hook's calls in order, and
// releases it.
func (b *breaker) closeLocked() {
	defer b.mu.Unlock()
	b.isOpen.Store(false)
	close(b.stop)
	if b.recover != nil {
		// For what the fallback admitted while the breaker closed: calls
		// that found it open a moment ago.
		b.bg.spawn(func(ctx context.Context) {
			select {
			case <-time.After(stragglerWait):
				b.recover(ctx)
			case <-ctx.Done():
			}
		})
	}
	if b.hook != nil {
		b.hook.BreakerClosed(b.node, b.now().Sub(b.openedAt))
	}
}

// failed counts a failure, caused by err, and opens the breaker after
// enough of them in a row.
func (b *breaker) failed(err error) {
	if b.isOpen.Load() {
		return // a call sent before the breaker opened
	}
	if b.failures.Add(1) < int64(b.cfg.failures) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.isOpen.Load() {
		return
	}
	b.isOpen.Store(true)
	b.openedAt = b.now()
	b.stop = make(chan struct{})
	stop := b.stop
	b.bg.spawn(func(ctx context.Context) { b.probe(ctx, stop) })
	if b.hook != nil {
		b.hook.BreakerOpened(b.node, err)
	}
}

// probe asks Redis whether it is back until it answers and probe closes
// the breaker, or stop is closed, or ctx ends (the limiter is closed), or
// the client is: backoff after the breaker opened, then backoff (doubling
// up to maxBackoff) after each probe began, or when it ended if it took
// longer.
func (b *breaker) probe(ctx context.Context, stop chan struct{}) {
	interval, wait := b.cfg.backoff, b.cfg.backoff
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-b.after(wait):
		}
		began := b.now()
		err := b.ask(ctx)
		if errors.Is(err, redis.ErrClosed) || ctx.Err() != nil {
			return // nothing will answer: the breaker stays open
		}
		if err == nil || !redisUnavailable(err) {
			if b.recover != nil {
				rctx, cancel := context.WithTimeout(ctx, recoverTimeout)
				b.recover(rctx)
				cancel()
			}
			b.closeFor(stop)
			return
		}
		interval = min(2*interval, b.cfg.maxBackoff)
		wait = max(interval-b.now().Sub(began), 0)
	}
}

// closeFor closes the breaker if it is still in the opening whose probe
// was told to end by stop.
func (b *breaker) closeFor(stop chan struct{}) {
	b.mu.Lock()
	if !b.isOpen.Load() || b.stop != stop {
		b.mu.Unlock()
		return
	}
	b.failures.Store(0)
	b.closeLocked()
}

// record feeds the outcome of a call sent to Redis to the breaker.
func (b *breaker) record(ctx context.Context, err error) {
	switch {
	case err == nil:
		b.succeeded()
	case ctx.Err() != nil:
		// The caller gave up: it says nothing about Redis.
	case redisUnavailable(err):
		b.failed(err)
	default: // Redis answered, with an error about this call only
		b.succeeded()
	}
}

// probeNode asks the node of opts whether it runs scripts, with EVAL
// "return 1" on a connection of its own, dialled with the client's dialer
// (so with its TLS and, for a failover client, its sentinels), and
// returns nil when the node answers, or an error that [redisUnavailable]
// judges. A script, not a PING, because CLIENT PAUSE WRITE (as a manual
// failover sends) holds scripts and lets PING through. It does not use the
// client's pool: go-redis stops dialling for a second at a time once its
// pool has failed PoolSize dials in a row, which a probe of a long outage
// would bring about, delaying the recovery it is there to notice. Any
// reply but an error saying the server cannot serve means the node is
// back: a server that wants AUTH is up, and the calls' own connections
// authenticate.
func probeNode(ctx context.Context, opts *redis.Options) error {
	ctx, cancel := context.WithTimeout(ctx, orDefault(opts.DialTimeout)+orDefault(opts.ReadTimeout))
	defer cancel()
	conn, err := opts.Dialer(ctx, opts.Network, opts.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := conn.Write([]byte(probeCommand)); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "-") {
		return probeReply(strings.TrimSpace(line[1:]))
	}
	return nil
}

// probeCommand is EVAL "return 1" 0 in the Redis protocol.
const probeCommand = "*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n"

// orDefault returns d, or go-redis's default timeout (5s) when d is not
// positive (no timeout).
func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return 5 * time.Second
	}
	return d
}

// probeReply is an error reply to a probe.
type probeReply string

// Error returns the reply.
func (e probeReply) Error() string { return string(e) }

// RedisError makes probeReply a [redis.Error].
func (probeReply) RedisError() {}

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
