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
// Unix epoch). The limiters that share a client and prefix are one process.
// Beside it, <prefix>{processes}:mark:<member> holds each process's mark,
// by which it tells which of its writes Redis lost
// ([guard.FleetAbilities.Marks]).

// fleetName names the heartbeat of a client and a prefix.
type fleetName struct {
	client redis.UniversalClient
	prefix string
}

// fleetKey returns the key of the heartbeat of prefix: one key, with a
// hash tag of its own, so that it lives on one master of a cluster; no
// storage key has a tag without a colon in it.
func fleetKey(prefix string) string { return prefix + "{processes}" }

// markKey returns the key of member's mark (see [guard.Heartbeater.Mark]),
// beside the heartbeat's, with its hash tag.
func markKey(prefix, member string) string { return fleetKey(prefix) + ":mark:" + member }

// The heartbeat's scripts (lua/heartbeat.lua.tmpl): a beat, which writes
// the process's mark too, and a mark alone.
var (
	heartbeatText   = renderScript("heartbeat", scriptData{})
	markText        = renderScript("mark", scriptData{})
	heartbeatScript = redis.NewScript(sendable(heartbeatText))
	markScript      = redis.NewScript(sendable(markText))
)

// FleetName names the limiter's heartbeat: its client and prefix. See
// [guard.Heartbeater].
func (l guarded) FleetName() any { return fleetName{l.client, l.prefix} }

// FleetAbilities reports that the limiter's processes rejoin after an
// outage and keep marks, whatever the client: a Ring's Mark and BeatMark
// fail wrapping errors.ErrUnsupported (see errRingMarks), and its
// heartbeat then writes no more. See [guard.Heartbeater].
func (guarded) FleetAbilities() guard.FleetAbilities {
	return guard.FleetAbilities{Rejoins: true, Marks: true}
}

// Beat renews member, drops the members that expired and reads how many
// are left, in one script run on one key (the scores are the process's
// clock). See [guard.Heartbeater].
func (l guarded) Beat(ctx context.Context, member string, now time.Time, ttl time.Duration) (int64, error) {
	n, _, err := l.beat(ctx, member, now, ttl, "")
	return n, err
}

// BeatMark is Beat, which also writes member's mark,
// <prefix>{processes}:mark:<member>, and reads the one before and the
// server's replication ID, in the same script run; on a cluster, it
// writes a mark on each master at once (see markMasters). A Ring cannot
// keep marks: it cannot tell which of its shards holds a key. See
// [guard.Heartbeater].
func (l guarded) BeatMark(ctx context.Context, member string, now time.Time, ttl time.Duration, mark string) (int64, []guard.MarkRead, error) {
	switch l.client.(type) {
	case *redis.Ring:
		return 0, nil, errRingMarks
	case *redis.ClusterClient:
		return l.beatMasters(ctx, member, now, ttl, mark)
	}
	n, read, err := l.beat(ctx, member, now, ttl, mark)
	if err != nil {
		return 0, nil, err
	}
	return n, []guard.MarkRead{read}, nil
}

// errRingMarks says that a Ring cannot keep marks.
var errRingMarks = fmt.Errorf("redislimit: a Ring keeps no marks: %w", errors.ErrUnsupported)

// beat runs the heartbeat's script, which writes mark unless it is "".
func (l guarded) beat(ctx context.Context, member string, now time.Time, ttl time.Duration, mark string) (int64, guard.MarkRead, error) {
	ms := now.UnixMilli()
	keys := []string{fleetKey(l.prefix), markKey(l.prefix, member)}
	reply, err := heartbeatScript.Run(ctx, l.client, keys, member, ms+ttl.Milliseconds(), "("+strconv.FormatInt(ms, 10), ttl.Milliseconds(), mark, guard.MarkTTL.Milliseconds()).Slice()
	if err != nil {
		return 0, guard.MarkRead{}, closedError(err)
	}
	n, ok := int64(0), len(reply) == 3
	if ok {
		n, ok = reply[0].(int64)
	}
	if !ok {
		return 0, guard.MarkRead{}, fmt.Errorf("redislimit: heartbeat replied %v", reply)
	}
	return n, markRead(reply[1:]), nil
}

// Mark writes member's mark and reads the one before and the server's
// replication ID, in one script run; on a cluster, on each master (see
// markMasters). See [guard.Heartbeater].
func (l guarded) Mark(ctx context.Context, member, mark string) ([]guard.MarkRead, error) {
	switch l.client.(type) {
	case *redis.Ring:
		return nil, errRingMarks
	case *redis.ClusterClient:
		return l.markMasters(ctx, member, mark)
	}
	read, err := l.markOn(ctx, l.client, fleetKey(l.prefix), member, mark)
	if err != nil {
		return nil, err
	}
	return []guard.MarkRead{read}, nil
}

// markOn runs the mark script on client, with the mark's key beside key
// (which names the slot).
func (l guarded) markOn(ctx context.Context, client redis.Scripter, key, member, mark string) (guard.MarkRead, error) {
	keys := []string{key, key + ":mark:" + member}
	reply, err := markScript.Run(ctx, client, keys, mark, guard.MarkTTL.Milliseconds()).Slice()
	if err != nil {
		return guard.MarkRead{}, closedError(err)
	}
	if len(reply) != 2 {
		return guard.MarkRead{}, fmt.Errorf("redislimit: mark replied %v", reply)
	}
	return markRead(reply), nil
}

// markRead reads a script's reply of the mark before and the replication
// ID (nil and "" when absent).
func markRead(reply []any) guard.MarkRead {
	before, _ := reply[0].(string)
	history, _ := reply[1].(string)
	return guard.MarkRead{Before: before, History: history}
}

// Rejoin marks member back, in the sorted set <prefix>{processes}:back
// scored by when it came back, and counts the members marked at or after
// since, in one MULTI/EXEC. The heartbeat's own beats are not marks: a
// beat sent while Redis was stopped lands when it resumes, before the
// process that sent it has found it back. See [guard.Heartbeater].
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
