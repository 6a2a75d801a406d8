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
// Beside it, <prefix>{processes}:epoch holds the epoch marker by which the
// processes tell that Redis lost its state ([guard.Epocher]), read by each
// beat.

// fleetName names the heartbeat of a client and a prefix.
type fleetName struct {
	client redis.UniversalClient
	prefix string
}

// fleetKey returns the key of the heartbeat of prefix: one key, with a
// hash tag of its own, so that it lives on one master of a cluster; no
// storage key has a tag without a colon in it.
func fleetKey(prefix string) string { return prefix + "{processes}" }

// epochKey returns the key of the epoch marker of prefix (see
// [guard.Epocher]), beside the heartbeat's, with its hash tag.
func epochKey(prefix string) string { return fleetKey(prefix) + ":epoch" }

// The heartbeat's scripts (lua/heartbeat.lua.tmpl): a beat, which reads
// the epoch marker too, and a read of the marker alone.
var (
	heartbeatText   = renderScript("heartbeat", scriptData{})
	epochText       = renderScript("epoch", scriptData{})
	heartbeatScript = redis.NewScript(sendable(heartbeatText))
	epochScript     = redis.NewScript(sendable(epochText))
)

// FleetName names the limiter's heartbeat: its client and prefix. See
// [guard.Heartbeater].
func (l guarded) FleetName() any { return fleetName{l.client, l.prefix} }

// Beat renews member, drops the members that expired and reads how many
// are left, in one script run on one key (the scores are the process's
// clock). See [guard.Heartbeater].
func (l guarded) Beat(ctx context.Context, member string, now time.Time, ttl time.Duration) (int64, error) {
	n, _, err := l.BeatEpoch(ctx, member, now, ttl, "")
	return n, err
}

// BeatEpoch is Beat, which also reads the epoch marker,
// <prefix>{processes}:epoch, setting it to fresh when absent (unless fresh
// is ""), in the same script run. A Ring's marker is "": it is kept on
// one shard of several. See [guard.Epocher].
func (l guarded) BeatEpoch(ctx context.Context, member string, now time.Time, ttl time.Duration, fresh string) (int64, string, error) {
	_, ring := l.client.(*redis.Ring)
	if ring {
		fresh = ""
	}
	ms := now.UnixMilli()
	keys := []string{fleetKey(l.prefix), epochKey(l.prefix)}
	reply, err := heartbeatScript.Run(ctx, l.client, keys, member, ms+ttl.Milliseconds(), "("+strconv.FormatInt(ms, 10), ttl.Milliseconds(), fresh).Slice()
	if err != nil {
		return 0, "", closedError(err)
	}
	if len(reply) != 2 {
		return 0, "", fmt.Errorf("redislimit: heartbeat replied %v", reply)
	}
	n, ok := reply[0].(int64)
	if !ok {
		return 0, "", fmt.Errorf("redislimit: heartbeat replied %v", reply)
	}
	epoch, _ := reply[1].(string) // nil when fresh is "" and it is absent
	if ring {
		epoch = ""
	}
	return n, epoch, nil
}

// Epoch reads the epoch marker, setting it to fresh when absent, in one
// script run ("" for a Ring, see BeatEpoch). See [guard.Epocher].
func (l guarded) Epoch(ctx context.Context, fresh string) (string, error) {
	if _, ring := l.client.(*redis.Ring); ring {
		return "", nil
	}
	keys := []string{fleetKey(l.prefix), epochKey(l.prefix)}
	epoch, err := epochScript.Run(ctx, l.client, keys, fresh).Text()
	return epoch, closedError(err)
}

// Rejoin marks member back, in the sorted set <prefix>{processes}:back
// scored by when it came back, and counts the members marked at or after
// since, in one MULTI/EXEC. The heartbeat's own beats are not marks: a
// beat sent while Redis was stopped lands when it resumes, before the
// process that sent it has found it back. See [guard.Rejoiner].
func (l guarded) Rejoin(ctx context.Context, member string, now, since time.Time, ttl time.Duration) (int64, error) {
	key := fleetKey(l.prefix) + ":back"
	pipe := l.client.TxPipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(now.UnixMilli()), Member: member})
	back := pipe.ZCount(ctx, key, strconv.FormatInt(since.UnixMilli(), 10), "+inf")
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
