package redislimit

import (
	"strings"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// Option configures a [Limiter]: [New] takes the options of package
// ratelimit, which configure every limiter, those of this package, which
// configure only a Limiter (they are not ratelimit.Options, so passing one
// to another limiter, such as ratelimit.NewMemory, does not compile, nor
// to a guard of package guard), and guard.Options, which configure the
// guards New puts around the Redis backend. Any other option with the
// method Configure is taken too, and changes what its Configure changes.
type Option = interface {
	// Configure sets the part of c that the option sets: nothing, for
	// the options of this package and of package guard.
	Configure(c *ratelimit.Config)
}

// option is an Option of this package; [New] finds it among its options.
type option func(*settings)

// Configure leaves c as it is.
func (option) Configure(*ratelimit.Config) {}

// settings are what the options of this package set.
type settings struct {
	prefix string
	batch  int
	// guards are the options of package guard that options of this
	// package carry (see forGuards).
	guards []guard.Option
}

// forGuards returns an option of this package that carries o, an option
// of package guard, to the guards that [New] puts around the backend.
func forGuards(o guard.Option) Option {
	return option(func(s *settings) { s.guards = append(s.guards, o) })
}

// newSettings returns the settings that the options of this package among
// opts set, over the defaults, and the options of package guard among
// opts and those that options of this package carry, in their order.
func newSettings(opts []Option) settings {
	s := settings{
		prefix: DefaultPrefix,
		batch:  DefaultBatch,
	}
	for _, o := range opts {
		switch o := o.(type) {
		case option:
			o(&s)
		case guard.Option:
			s.guards = append(s.guards, o)
		}
	}
	return s
}

// DefaultBatch is how many concurrent calls a Redis limiter decides in one
// script run unless [WithBatching] says otherwise.
const DefaultBatch = 64

// WithBatching makes a [ratelimit.Limiter] decide concurrent calls together,
// up to max per script run ("group commit"): a call that finds no batch
// in flight sends one at once; calls that arrive while a batch is in
// flight queue, and the first of them (the leader) sends the next batch,
// deciding up to max queued calls in one EVALSHA, the leader first, the
// others in the order they queued. Each call is decided exactly as it
// would be alone (the calls of a batch read the server's clock once, as
// if they arrived at the same instant), and one call's failure (such as a key of the wrong type) fails only that call.
//
// It helps when many goroutines call the limiter at once and Redis's one
// thread is the bottleneck: a batch costs Redis one command's network
// work instead of one per call. It adds no latency when calls are not
// concurrent: a call alone is sent at once, as without batching. A queued
// call waits for the batch in flight to return, but at most a tenth of the
// client's ReadTimeout: then it sends the queued calls in a batch of their
// own, on another connection, so that no call waits for two round trips
// and a batched call against a stalled Redis fails after at most 1.1 times
// the ReadTimeout, like a call alone. A batch's script blocks Redis for the
// decisions of all its calls (microseconds each).
//
// A batch is not cancelled by any one call's context: it runs with the
// context of the call that sends it, without its cancellation, bounded by
// the client's timeouts, and the call that sends it returns when it does.
// A call whose context ends while it waits for another's batch returns
// at once with a [*ratelimit.BackendError] wrapping the context's error, like a
// network timeout; if its request was already in a batch on its way, its
// decision may still have been made and charged.
//
// Batching is on by default, up to [DefaultBatch] calls per run; max
// below 2 turns it off. The memory limiter ignores it, and so does a Redis
// limiter with a *redis.ClusterClient or *redis.Ring, whose calls' keys
// live on different nodes.
func WithBatching(max int) Option {
	return option(func(s *settings) { s.batch = max })
}

// WithDenyCache sizes the limiter's local deny cache: it remembers up to
// about entries recent denials (rounded up to a power of two; 0 turns the
// cache off) and repeats them without asking Redis, answering exactly what
// Redis would answer then, with Source [ratelimit.SourceCache]. It repeats
// only denials that no call could change until they end (Remaining 0, for
// calls of cost 1, or of any cost against a fixed window) and holds each
// at most the deny hold ([WithDenyHold]), so state lost out of band is
// seen within that bound; see the package doc. On by default
// ([DefaultDenyCache] entries, a few MiB at most). The cache is the deny
// cache guard of package guard around the Redis backend, to which the
// option carries [guard.WithDenyCache].
func WithDenyCache(entries int) Option { return forGuards(guard.WithDenyCache(entries)) }

// DefaultDenyCache is how many denials a Redis limiter remembers unless
// [WithDenyCache] says otherwise.
const DefaultDenyCache = guard.DefaultDenyCache

// DefaultDenyHold is how long the deny cache holds a denial at most unless
// [WithDenyHold] says otherwise.
const DefaultDenyHold = guard.DefaultDenyHold

// WithDenyHold bounds how long the deny cache repeats a denial without
// asking Redis again (default [DefaultDenyHold]), and so how long every
// process takes to see state that was lost or reset out of band; d <= 0
// keeps the default. It carries [guard.WithDenyHold] to the deny cache.
func WithDenyHold(d time.Duration) Option { return forGuards(guard.WithDenyHold(d)) }

// WithBreaker tunes the circuit breaker of a [Limiter]: after failures
// consecutive calls failed because Redis was unreachable or unavailable,
// the call that failed last probes Redis on a connection of its own; if
// Redis does not answer that either, the breaker opens (if it does, the
// count starts again: calls that time out while Redis answers are load,
// not an outage), and the limiter stops sending the calls' commands and
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
// Only failures of the connection (refused, reset, timed out) and replies
// saying the server cannot serve (CLUSTERDOWN, LOADING, MASTERDOWN,
// TRYAGAIN, READONLY, BUSY) count. A call whose context ended counts
// neither way: the caller gave up, Redis may be fine. Nor does a call that
// waited longer than the client's PoolTimeout for a pooled connection: the
// client is saturated, not Redis, so the call is shed ([ratelimit.ErrBusy]:
// denied with a retry, whatever the error policy) and no breaker opens on
// the limiter's own load.
// A [ratelimit.Hook] that implements [ratelimit.BreakerHook] is told when
// a breaker opens and closes; without one, the opening is logged at Warn
// and the closing at Info to slog.Default(), so an outage says so once.
// The breakers are the circuit breaker guard of package guard around the
// Redis backend, to which the option carries [guard.WithBreaker].
func WithBreaker(failures int, backoff, maxBackoff time.Duration) Option {
	return forGuards(guard.WithBreaker(failures, backoff, maxBackoff))
}

// The circuit breaker defaults of [New]; see [WithBreaker].
const (
	// DefaultBreakerFailures is how many consecutive failed calls open the
	// breaker.
	DefaultBreakerFailures = guard.DefaultBreakerFailures
	// DefaultBreakerBackoff is how long an open breaker waits before it
	// first asks Redis whether it is back, and between such probes.
	DefaultBreakerBackoff = guard.DefaultBreakerBackoff
	// DefaultBreakerMaxBackoff bounds the wait between probes as it
	// doubles. It equals [DefaultBreakerBackoff]: by default the wait does
	// not grow, so Redis decides again within about 150ms of its return
	// however long it was away.
	DefaultBreakerMaxBackoff = guard.DefaultBreakerMaxBackoff
)

// DefaultPrefix starts every Redis key the limiter writes.
const DefaultPrefix = "ratelimit:"

// WithPrefix sets the prefix of every Redis key (default "ratelimit:").
// Braces are removed from it, because a brace would change the key's Redis
// Cluster hash tag.
func WithPrefix(prefix string) Option {
	return option(func(s *settings) {
		s.prefix = strings.NewReplacer("{", "", "}", "").Replace(prefix)
	})
}

// WithFallbackProcesses gives each of n processes sharing one Redis a
// share of every limit while the local fallback decides ([ratelimit.FailLocal]), so
// that together they admit about the limit, not n times it, during an
// outage: the fallback divides each threshold, and each burst and capacity
// that is set, by n, rounding down but never below 1 (with a threshold
// below n the processes together admit up to n per period). Overrides are
// divided too. A call whose cost is above its process's share of a
// limit's burst or capacity can never be admitted by the fallback: it
// fails as under [ratelimit.FailClosed], with the backend's error.
//
// Without it, n is the number of processes sharing the Redis and key
// prefix, as their heartbeat last counted them before the outage (1 if it
// never could): the limiters of one client are one process, which writes
// its member of the sorted set <prefix>{processes} once a second, expiring
// after 4s, and reads how many there are. n < 1 keeps the heartbeat's count; n >= 1 fixes n and turns
// the heartbeat off. The memory limiter ignores it. The fallback is the
// local fallback guard of package guard around the Redis backend, to
// which the option carries [guard.WithFallbackProcesses].
func WithFallbackProcesses(n int) Option { return forGuards(guard.WithFallbackProcesses(n)) }
