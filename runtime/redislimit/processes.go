package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// The Redis side of the heartbeat by which the processes sharing a Redis
// (and a key prefix) count themselves (see [guard.JoinFleet] and
// [WithFallbackProcesses]): each process's member of the sorted set
// <prefix>{processes}, scored by when it stops counting (ms since the
// epoch). The limiters that share a client and prefix are one process.

// fleetName names the heartbeat of a client and a prefix.
type fleetName struct {
	client redis.UniversalClient
	prefix string
}

// fleetKey returns the key of the heartbeat of prefix: one key, with a
// hash tag of its own, so that it lives on one master of a cluster; no
// storage key has a tag without a colon in it.
func fleetKey(prefix string) string { return prefix + "{processes}" }

// FleetName names the limiter's heartbeat: its client and prefix. See
// [guard.Heartbeater].
func (l *redisBackend) FleetName() any { return fleetName{l.client, l.prefix} }

// Beat renews member, drops the members that expired and reads how many
// are left, in one MULTI/EXEC on one key (no script: the scores are the
// process's clock). See [guard.Heartbeater].
func (l *redisBackend) Beat(ctx context.Context, member string, now time.Time, ttl time.Duration) (int64, error) {
	key, ms := fleetKey(l.prefix), now.UnixMilli()
	pipe := l.client.TxPipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(ms + ttl.Milliseconds()), Member: member})
	pipe.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(ms, 10))
	card := pipe.ZCard(ctx, key)
	pipe.PExpire(ctx, key, ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, closedError(err)
	}
	return card.Val(), nil
}

// Leave removes member with one ZREM. See [guard.Heartbeater].
func (l *redisBackend) Leave(ctx context.Context, member string) error {
	return closedError(l.client.ZRem(ctx, fleetKey(l.prefix), member).Err())
}

// closedError returns err, wrapping [guard.ErrClosed] too when it says the
// client is closed.
func closedError(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%w: %w", guard.ErrClosed, err)
	}
	return err
}

// joinFleet puts l in the heartbeat of its client and prefix, starting it
// if l is the first limiter there. The heartbeat skips beats while l's
// breaker is open.
func (l *redisBackend) joinFleet() {
	l.fleet = guard.JoinFleet(l, func() bool { return l.down != nil && l.down() })
}

// leaveFleet takes l out of its heartbeat (see [guard.FleetMember.Leave]).
func (l *redisBackend) leaveFleet() {
	if l.fleet != nil {
		l.fleet.Leave()
	}
}

// processes returns how many processes share the limits in the local
// fallback: WithFallbackProcesses's n, else the count of processes the
// heartbeat last read, at least 1.
func (l *redisBackend) processes() int {
	if l.fallbackProcesses > 0 {
		return l.fallbackProcesses
	}
	if l.fleet == nil {
		return 1
	}
	return l.fleet.Fleet().Processes()
}

var _ guard.Heartbeater = (*redisBackend)(nil)
