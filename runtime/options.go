package ratelimit

import (
	"context"
	"time"
)

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

// InFlightHook is a [Hook] that counts the calls in flight: it is told of
// each concurrency slot a call takes (delta 1) and gives back (-1), as
// limitmetrics.Metrics counts them.
type InFlightHook interface {
	Hook
	InFlight(ctx context.Context, name string, delta int)
}

// BreakerHook is implemented by a [Hook] that wants to know when
// a circuit breaker of a limiter opens and closes, to report an outage
// once rather than once per failed call. Both methods are called once per
// change of state, in order, on the goroutine that made it, so they must
// be quick and must not call the limiter. limitmetrics.Metrics and
// [SlogHook] are BreakerHooks (see guard.WithBreaker).
type BreakerHook interface {
	// BreakerOpened is called when the breaker guarding node (the
	// backend's, or a node's: a Redis client's address, or a cluster
	// master's) opens because of err.
	BreakerOpened(node string, err error)
	// BreakerClosed is called when node answers again after the breaker
	// was open for the duration open.
	BreakerClosed(node string, open time.Duration)
}

// Config is what a limiter's [Option]s set. A limiter reads it once, when
// it is made; [Rule.Check] reads a limiter's Overrides and
// ErrorPolicy on every call.
type Config struct {
	// Clock tells the time; nil means the backend's own clock (the Redis
	// server's, or the process's). See [WithClock].
	Clock Clock
	// Hook is told of every decision and failure; nil means none. See
	// [WithHook].
	Hook Hook
	// ErrorPolicy is the default policy of rules whose OnError is empty.
	// See [WithErrorPolicy].
	ErrorPolicy ErrorPolicy
	// Overrides replaces rules' limits at run time; nil means none. See
	// [WithOverrides].
	Overrides Overrides
	// MaxKeys bounds the (name, key) pairs kept in process. See
	// [WithMaxKeys].
	MaxKeys int
}

// NewConfig returns the Config that opts set, over the defaults: no clock,
// hook or overrides, [FailLocal] and [DefaultMaxKeys]. The opts are this
// package's Options or a backend's own option type (see [Option]); a Hook
// is wrapped so that the would-be denials of shadow rules reach its
// ShadowLimited method (see [ShadowHook]) and a breaker's changes its
// [BreakerHook] methods.
func NewConfig[O interface{ Configure(*Config) }](opts ...O) Config {
	c := Config{MaxKeys: DefaultMaxKeys, ErrorPolicy: FailLocal}
	for _, o := range opts {
		if any(o) != nil {
			o.Configure(&c)
		}
	}
	if c.Hook != nil {
		c.Hook = routeShadow(c.Hook)
	}
	return c
}

// Option configures every limiter. Only this package makes Options (the
// zero Option changes nothing), so a backend's own option is a compile
// error where an Option is taken (as by [NewMemory]). A backend with
// options of its own declares
// "type Option = interface{ Configure(*ratelimit.Config) }", which Options
// satisfy, gives its own a Configure that changes nothing, and passes its
// list to NewConfig: one list then configures it, as in redislimit.New.
type Option struct{ set func(*Config) }

// configure returns the Option that runs set.
func configure(set func(*Config)) Option { return Option{set: set} }

// Configure sets the part of c that o sets.
func (o Option) Configure(c *Config) {
	if o.set != nil {
		o.set(c)
	}
}

// WithClock makes the limiter read the time from clock instead of from the
// Redis server (or the process's clock for the memory limiter). It exists
// for tests; in production every process must share the Redis server's
// clock, which is the default. On Redis the clock must not read earlier
// than the server's: the keys of the window algorithms expire at times
// read from it.
func WithClock(clock Clock) Option {
	return configure(func(c *Config) { c.Clock = clock })
}

// WithHook reports every decision and failure to each of hooks in turn,
// skipping nil ones. With several, the limiter's hook is a [ShadowHook]:
// a would-be denial of a shadow rule goes to the ShadowLimited method of
// the hooks that have one and to Decided of the others.
func WithHook(hooks ...Hook) Option {
	h := joinHooks(hooks...)
	return configure(func(c *Config) { c.Hook = h })
}

// WithErrorPolicy sets the limiter's default [ErrorPolicy]: what
// [Rule.Check] does with a call the limiter could not decide, for rules
// whose OnError is empty. The default is [FailLocal], which keeps every
// limit through an outage (each process decides against its share, or the
// call fails as under FailClosed where the limiter has no fallback);
// FailOpen lifts every limit for as long as the backend fails. An empty p
// keeps the default, and any value other than FailOpen, FailClosed and
// FailLocal means FailClosed.
func WithErrorPolicy(p ErrorPolicy) Option {
	return configure(func(c *Config) {
		if p != "" {
			c.ErrorPolicy = p
		}
	})
}

// WithOverrides lets src replace a rule's limits at run time, by the
// rule's name (and, when src is a [KeyOverrides], by key and tier):
// [Rule.Check] asks src on every call, so src must answer from memory. The
// state is kept: limit i of an override counts where limit i of the rule
// does, so lowering a threshold applies to the calls already admitted. An
// override is ignored when it has more than [MaxLimits] limits, an invalid
// one, or a limit i of another algorithm than the rule's limit i (an empty
// Algorithm means the rule's).
func WithOverrides(src Overrides) Option {
	return configure(func(c *Config) { c.Overrides = src })
}

// WithMaxKeys bounds how many keys the memory limiter, and the Redis
// limiter's local fallback ([FailLocal]), keep (default [DefaultMaxKeys]).
func WithMaxKeys(n int) Option {
	return configure(func(c *Config) {
		if n > 0 {
			c.MaxKeys = n
		}
	})
}
