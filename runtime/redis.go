package ratelimit

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/decide.lua
var decideSource string

// decideScript is run with EVALSHA; go-redis falls back to EVAL (which
// loads the script again) when the server answers NOSCRIPT, such as after
// a restart or SCRIPT FLUSH.
var decideScript = redis.NewScript(decideSource)

// RedisLimiter decides calls in Redis with one script round trip each. The
// script reads the Redis server's clock, so every process sharing the
// server shares one consistent window whatever its own clock says. It works
// with a single server, a failover client and a Redis Cluster: all keys of
// one call share a hash tag.
//
// Memory: a sliding-log limit keeps one list entry (about 10 bytes) per
// admitted unit in its window, and every key expires one second after its
// window empties.
//
// Failures: a call Redis cannot decide costs what the client spends on it:
// its dial or read timeout, times the attempts it makes (1 + MaxRetries
// for errors it retries, and DialerRetries dials per attempt, with their
// back-offs). Configure MaxRetries: -1 and DialerRetries: 1 for one
// timeout. After a few such failures in a row a circuit breaker fails the
// calls at once for a while; see [WithBreaker].
type RedisLimiter struct {
	client  redis.UniversalClient
	breaker *breaker
	config
}

// NewRedis returns a limiter that keeps its state in client's Redis.
func NewRedis(client redis.UniversalClient, opts ...Option) *RedisLimiter {
	c := newConfig(opts)
	return &RedisLimiter{client: client, breaker: newBreaker(c.breaker), config: c}
}

// CircuitOpen reports whether the limiter's circuit breaker is failing
// calls without asking Redis now, as a health check may want to know.
func (l *RedisLimiter) CircuitOpen() bool {
	return l.breaker != nil && l.breaker.open()
}

// Allow decides req in one EVALSHA. See [Limiter].
func (l *RedisLimiter) Allow(ctx context.Context, req Request) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	probe := false
	if l.breaker != nil {
		var ok bool
		if ok, probe = l.breaker.allow(); !ok {
			return Decision{}, l.failed(ctx, &req, ErrCircuitOpen)
		}
	}
	keys := make([]string, len(req.Limits))
	args := make([]any, 2, 2+4*len(req.Limits))
	args[0] = ""
	if l.clock != nil {
		args[0] = l.clock.Now().UnixMicro()
	}
	args[1] = req.cost()
	for i, lim := range req.Limits {
		keys[i] = storageKey(l.prefix, req.Name, req.Key, i)
		args = append(args, string(lim.algorithm()), lim.Period.Microseconds(), lim.Threshold, lim.Burst)
	}
	res, err := decideScript.Run(ctx, l.client, keys, args...).Int64Slice()
	if err == nil && len(res) != 5 {
		err = &replyError{n: len(res)}
	}
	if l.breaker != nil {
		l.breaker.record(ctx, probe, err)
	}
	if err != nil {
		return Decision{}, l.failed(ctx, &req, err)
	}
	d := Decision{
		Allowed:    res[0] == 1,
		Remaining:  res[1],
		RetryAfter: time.Duration(res[2]) * time.Microsecond,
		ResetAfter: time.Duration(res[3]) * time.Microsecond,
		Limit:      int(res[4]),
	}
	if l.hook != nil {
		l.hook.Decided(ctx, &req, d)
	}
	return d, nil
}

// failed reports a call the limiter could not decide because of cause.
func (l *RedisLimiter) failed(ctx context.Context, req *Request, cause error) error {
	err := &BackendError{Name: req.Name, Err: cause}
	if l.hook != nil {
		l.hook.Failed(ctx, req, err)
	}
	return err
}

// Key returns the Redis key that holds limit index i of the calls named
// name with per-call key key, for inspecting state with redis-cli.
func (l *RedisLimiter) Key(name, key string, i int) string {
	return storageKey(l.prefix, name, key, i)
}

var _ Limiter = (*RedisLimiter)(nil)
