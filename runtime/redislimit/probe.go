package redislimit

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

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

// probeClient asks the node of client whether the client's calls can be
// served again: first on a connection of its own ([probeNode]), then,
// once the node answers there, with the same script through the client's
// pool, which the calls take. A pool that failed PoolSize dials in a row
// answers with its last dial error ("connection refused") without
// dialling, until a dial of its own in the background, once a second,
// finds the node back; a breaker closed on the first answer alone would
// send the calls into that stale error and open again (1 to 3 times per
// Redis restart, measured). So the breaker closes once the pool serves,
// and no dial of the pool is spent while the node is away.
func probeClient(ctx context.Context, client *redis.Client) error {
	opts := client.Options()
	if err := probeNode(ctx, opts); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(opts.DialTimeout)+orDefault(opts.ReadTimeout))
	defer cancel()
	return client.Eval(ctx, "return 1", nil).Err()
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
// cannot serve, rather than that it rejected this one call. The client's
// own saturation (no pooled connection free within the pool timeout,
// [ratelimit.ErrBusy]) is neither: Redis may be answering every call
// sent.
func redisUnavailable(err error) bool {
	if busy(err) {
		return false
	}
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

// busy reports whether err failed a call because the client was saturated:
// no pooled connection was free within its pool timeout.
func busy(err error) bool {
	return errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, ratelimit.ErrBusy)
}

// busyError is the cause of a call the client was too busy to send: it
// wraps ratelimit.ErrBusy beside the client's error.
type busyError struct{ err error }

// Error returns the client's error.
func (e busyError) Error() string { return e.err.Error() }

// Unwrap returns ratelimit.ErrBusy and the client's error.
func (e busyError) Unwrap() []error { return []error{ratelimit.ErrBusy, e.err} }

// classify returns err, marked as [ratelimit.ErrBusy] when the client was
// too busy to send the call (see busy), so that a breaker counts it
// neither way and the rule sheds the call.
func classify(err error) error {
	if err == nil || errors.Is(err, ratelimit.ErrBusy) || !errors.Is(err, redis.ErrPoolTimeout) {
		return err
	}
	return busyError{err}
}

// backendError returns the error of a call named name that Redis could not
// decide because of err.
func backendError(name string, err error) *ratelimit.BackendError {
	return &ratelimit.BackendError{Name: name, Err: classify(err)}
}
