package ratelimit

import (
	"context"
	"strings"
	"time"
)

// DefaultPrefix starts every Redis key the limiter writes.
const DefaultPrefix = "ratelimit:"

// Clock tells the time. Tests pass a controllable one with [WithClock].
type Clock interface {
	Now() time.Time
}

// Hook observes a limiter's decisions and failures. Its methods are called
// synchronously on the calling goroutine, so they must be quick. The
// request's Key is bounded as [LimitError]'s is.
type Hook interface {
	// Decided is called once per decided request.
	Decided(ctx context.Context, req *Request, d Decision)
	// Failed is called when no decision could be made.
	Failed(ctx context.Context, req *Request, err error)
}

// ShadowHook is a [Hook] that is told about the would-be denials of
// shadow rules ([Rule.Shadow]) apart from real ones. A limiter calls
// ShadowLimited instead of Decided for a denial it decided for a shadow
// rule; a Hook that is not a ShadowHook gets Decided for it, like any
// denial. Admissions under a shadow rule are reported with Decided.
type ShadowHook interface {
	Hook
	// ShadowLimited is called once per decision that would have denied a
	// call had its rule not been a shadow rule; the call went ahead.
	ShadowLimited(ctx context.Context, req *Request, d Decision)
}

// Option configures a limiter made by [NewRedis] or [NewMemory].
type Option func(*config)

type config struct {
	prefix      string
	clock       Clock
	hook        Hook
	breakerHook BreakerHook // hook, when it is one
	maxKeys     int
	errorPolicy ErrorPolicy
	overrides   Overrides
	breaker     breakerConfig
	batch       int
	denyCache   int
	// fallbackProcesses divides the limits of the local fallback.
	fallbackProcesses int
	// genericOnly makes a RedisLimiter run the generic decide script for
	// single limits too, so tests can check it decides them alike.
	genericOnly bool
}

func newConfig(opts []Option) config {
	c := config{
		prefix:      DefaultPrefix,
		maxKeys:     DefaultMaxKeys,
		batch:       DefaultBatch,
		denyCache:   DefaultDenyCache,
		errorPolicy: FailOpen,
		breaker:     breakerConfig{failures: DefaultBreakerFailures, backoff: DefaultBreakerBackoff, maxBackoff: DefaultBreakerMaxBackoff},
	}
	for _, o := range opts {
		o(&c)
	}
	if c.hook != nil {
		c.breakerHook, _ = c.hook.(BreakerHook)
		c.hook = routeShadow(c.hook)
	}
	return c
}

// settings gives [Rule.Check] the configuration of the limiters of this
// package (and of any type that embeds one).
func (c *config) settings() *config { return c }

// ErrorPolicy returns what [Rule.Check] does when this limiter fails and
// the rule's OnError is empty: [FailOpen] unless [WithErrorPolicy] said
// otherwise.
func (c *config) ErrorPolicy() ErrorPolicy { return c.errorPolicy }

// WithPrefix sets the prefix of every Redis key (default "ratelimit:").
// Braces are removed from it, because a brace would change the key's Redis
// Cluster hash tag.
func WithPrefix(prefix string) Option {
	return func(c *config) {
		c.prefix = strings.NewReplacer("{", "", "}", "").Replace(prefix)
	}
}

// WithClock makes the limiter read the time from clock instead of from the
// Redis server (or the process's clock for the memory limiter). It exists
// for tests; in production every process must share the Redis server's
// clock, which is the default. On Redis the clock must not read earlier
// than the server's: the keys of the window algorithms expire at times
// read from it.
func WithClock(clock Clock) Option {
	return func(c *config) { c.clock = clock }
}

// WithHook reports every decision and failure to hook.
func WithHook(hook Hook) Option {
	return func(c *config) { c.hook = hook }
}

// WithErrorPolicy sets the limiter's default [ErrorPolicy]: what
// [Rule.Check] does with a call the limiter could not decide, for rules
// whose OnError is empty. The default is [FailOpen]; an empty p keeps it,
// and any value other than FailOpen, FailClosed and [FailLocal] means
// FailClosed.
func WithErrorPolicy(p ErrorPolicy) Option {
	return func(c *config) {
		if p != "" {
			c.errorPolicy = p
		}
	}
}

// WithOverrides lets src replace the limits of a rule at run time, by the
// rule's name, without regenerating code or restarting: [Rule.Check] asks
// src for every call (so src must answer from memory, quickly) and decides
// the call against the limits it returns instead of the rule's own. The
// state is kept: limit i of an override counts in the same place as limit
// i of the rule, so lowering a threshold applies to the calls already
// admitted. An override is ignored (the rule's limits apply) when one of
// its limits is invalid or when limit i names another algorithm than the
// rule's limit i, whose state it could not read; an empty Algorithm means
// the rule's. See [NewRedisOverrides] for overrides kept in a Redis hash,
// and [KeyOverrides] for the limits of single keys and tiers, which src
// sets when it implements it.
//
// One caveat on Redis: a sliding log sets its key's TTL when the log is
// created or trimmed, to two periods past its newest entry. After an
// override lengthens a sliding_log period, a log that is not trimmed
// again may expire on the TTL its old period gave it (at most two old
// periods and a second after the override), forgetting calls that are
// still inside the new, longer window; the next trim sets the new TTL.
func WithOverrides(src Overrides) Option {
	return func(c *config) { c.overrides = src }
}

// WithMaxKeys bounds how many keys the memory limiter, and the Redis
// limiter's local fallback ([FailLocal]), keep (default [DefaultMaxKeys]).
func WithMaxKeys(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxKeys = n
		}
	}
}

// WithFallbackProcesses gives each of n processes sharing one Redis a
// share of every limit while the local fallback decides ([FailLocal]), so
// that together they admit about the limit, not n times it, during an
// outage: the fallback divides each threshold, and each burst and capacity
// that is set, by n, rounding down but never below 1 (with a threshold
// below n the processes together admit up to n per period). Overrides are
// divided too. A call whose cost is above its process's share of a
// limit's burst or capacity can never be admitted by the fallback: it
// fails as under [FailClosed], with the backend's error. The default is
// 1, the whole limit in each process; n < 1 keeps it. The memory limiter
// ignores it.
func WithFallbackProcesses(n int) Option {
	return func(c *config) {
		if n >= 1 {
			c.fallbackProcesses = n
		}
	}
}

// DefaultBatch is how many concurrent calls a Redis limiter decides in one
// script run unless [WithBatching] says otherwise.
const DefaultBatch = 64

// WithBatching makes a [RedisLimiter] decide concurrent calls together,
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
// at once with a [*BackendError] wrapping the context's error, like a
// network timeout; if its request was already in a batch on its way, its
// decision may still have been made and charged.
//
// Batching is on by default, up to [DefaultBatch] calls per run; max
// below 2 turns it off. The memory limiter ignores it, and so does a Redis
// limiter with a *redis.ClusterClient or *redis.Ring, whose calls' keys
// live on different nodes.
func WithBatching(max int) Option {
	return func(c *config) { c.batch = max }
}

// WithDenyCache sizes a [RedisLimiter]'s local deny cache: it remembers
// up to about entries recent denials (rounded up to a power of two; 0
// turns the cache off) and repeats them without asking Redis. A call of
// the same name, key and limits as a denied one, with a cost at least the
// denied call's, is denied in process until the denial's RetryAfter has
// passed, counted from when the denied call was sent: every such call
// Redis would deny too, since other calls can only fill a limit up. Such
// a decision has Source [SourceCache]; its RetryAfter and ResetAfter are
// what is left of those Redis told (for a costlier call, RetryAfter may
// be short of its own), and its Remaining and Limit those of the denial
// it repeats. Hooks see it like any denial (see [Metrics]).
//
// The cache is on by default ([DefaultDenyCache] entries, a few MiB at
// most). Its memory is bounded whatever the number of keys: a denial takes
// the place of an older one. A rule whose limits an override changes
// forgets its remembered denials; so does a rule some of whose keys have
// limits of their own ([KeyOverrides]), each time its calls switch between
// keys under different limits, which keeps the cache exact but lets it
// repeat fewer denials. While processes decide a key against
// different limits (an override seen by some processes and not yet by
// others), or when something else drains a limit in Redis (a DEL of its
// key), a remembered denial may outlast what Redis would answer, up to
// its RetryAfter. The memory limiter ignores it.
func WithDenyCache(entries int) Option {
	return func(c *config) { c.denyCache = entries }
}
