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
func (l guarded) FleetName() any { return fleetName{l.client, l.prefix} }

// Beat renews member, drops the members that expired and reads how many
// are left, in one MULTI/EXEC on one key (no script: the scores are the
// process's clock). See [guard.Heartbeater].
func (l guarded) Beat(ctx context.Context, member string, now time.Time, ttl time.Duration) (int64, error) {
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

// Rejoin renews member and counts the members renewed at or after since
// (their scores are when they stop counting: since + ttl or later), in
// one MULTI/EXEC on the heartbeat's key. See [guard.Rejoiner].
func (l guarded) Rejoin(ctx context.Context, member string, now, since time.Time, ttl time.Duration) (int64, error) {
	key := fleetKey(l.prefix)
	pipe := l.client.TxPipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(now.UnixMilli() + ttl.Milliseconds()), Member: member})
	back := pipe.ZCount(ctx, key, strconv.FormatInt(since.UnixMilli()+ttl.Milliseconds(), 10), "+inf")
	pipe.PExpire(ctx, key, ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, closedError(err)
	}
	return back.Val(), nil
}

// Leave removes member with one ZREM. See [guard.Heartbeater].
func (l guarded) Leave(ctx context.Context, member string) error {
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
