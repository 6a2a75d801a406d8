package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The heartbeat by which the limiters sharing a Redis (and a key prefix)
// count themselves, so that the local fallback gives each its share of a
// limit without being told how many there are (see [WithFallbackProcesses]).
const (
	// heartbeatEvery is how often a limiter says it is alive and reads how
	// many are.
	heartbeatEvery = time.Second
	// heartbeatTTL is how long a limiter is counted after it last said so:
	// a process that is gone stops counting within it, and clocks may be
	// skewed by up to heartbeatTTL-heartbeatEvery.
	heartbeatTTL = 4 * time.Second
)

// fleet is one limiter's place in the heartbeat: its member of the sorted
// set <prefix>{processes}, scored by when it stops counting (ms since the
// epoch), and the count of members it last read.
type fleet struct {
	key, id string
	// count is the number of limiters live at the latest heartbeat that
	// Redis answered; 0 before any.
	count atomic.Int64
	// beats counts the heartbeats Redis answered (for tests).
	beats atomic.Int64
}

// newFleet returns the heartbeat state of a limiter with prefix.
func newFleet(prefix string) *fleet {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// One key, with a hash tag of its own, so that it lives on one master
	// of a cluster; no storage key has a tag without a colon in it.
	return &fleet{key: prefix + "{processes}", id: hex.EncodeToString(b[:])}
}

// processes returns how many processes share the limits in the local
// fallback: WithFallbackProcesses's n, else the count of limiters the
// heartbeat last read, at least 1.
func (l *Limiter) processes() int {
	if l.fallbackProcesses > 0 {
		return l.fallbackProcesses
	}
	return int(max(l.fleet.count.Load(), 1))
}

// heartbeat beats every heartbeatEvery until the client is closed. It
// skips beats while the limiter's breaker is open: the count read before
// the outage stands, and the pool is not made to fail dials.
func (l *Limiter) heartbeat() {
	ctx := context.Background()
	for {
		if l.breaker == nil || !l.breaker.open() {
			if err := l.beat(ctx); errors.Is(err, redis.ErrClosed) {
				return
			}
		}
		time.Sleep(heartbeatEvery)
	}
}

// beat renews the limiter's member, drops the members that expired and
// reads how many are left, in one MULTI/EXEC on one key (no script: the
// scores are the process's clock).
func (l *Limiter) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, heartbeatTTL)
	defer cancel()
	now := time.Now().UnixMilli()
	f := l.fleet
	pipe := l.client.TxPipeline()
	pipe.ZAdd(ctx, f.key, redis.Z{Score: float64(now + heartbeatTTL.Milliseconds()), Member: f.id})
	pipe.ZRemRangeByScore(ctx, f.key, "-inf", "("+strconv.FormatInt(now, 10))
	card := pipe.ZCard(ctx, f.key)
	pipe.PExpire(ctx, f.key, heartbeatTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	f.count.Store(max(card.Val(), 1))
	f.beats.Add(1)
	return nil
}
