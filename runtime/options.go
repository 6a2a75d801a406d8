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
// synchronously on the calling goroutine, so they must be quick.
type Hook interface {
	// Decided is called once per decided request.
	Decided(ctx context.Context, req *Request, d Decision)
	// Failed is called when no decision could be made.
	Failed(ctx context.Context, req *Request, err error)
}

// Option configures a limiter made by [NewRedis] or [NewMemory].
type Option func(*config)

type config struct {
	prefix  string
	clock   Clock
	hook    Hook
	maxKeys int
}

func newConfig(opts []Option) config {
	c := config{prefix: DefaultPrefix, maxKeys: DefaultMaxKeys}
	for _, o := range opts {
		o(&c)
	}
	return c
}

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
// clock, which is the default.
func WithClock(clock Clock) Option {
	return func(c *config) { c.clock = clock }
}

// WithHook reports every decision and failure to hook.
func WithHook(hook Hook) Option {
	return func(c *config) { c.hook = hook }
}

// WithMaxKeys bounds how many keys the memory limiter keeps (default
// [DefaultMaxKeys]). The Redis limiter ignores it.
func WithMaxKeys(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxKeys = n
		}
	}
}
