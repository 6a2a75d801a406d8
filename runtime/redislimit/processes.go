package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The heartbeat by which the processes sharing a Redis (and a key prefix)
// count themselves, so that the local fallback gives each its share of a
// limit without being told how many there are (see [WithFallbackProcesses]).
const (
	// heartbeatEvery is how often a process says it is alive and reads how
	// many are.
	heartbeatEvery = time.Second
	// heartbeatTTL is how long a process is counted after it last said so:
	// a process that is gone stops counting within it, and clocks may be
	// skewed by up to heartbeatTTL-heartbeatEvery.
	heartbeatTTL = 4 * time.Second
)

// fleet is a process's place in the heartbeat of one client and prefix:
// its member of the sorted set <prefix>{processes}, scored by when it
// stops counting (ms since the epoch), and the count of members it last
// read. The limiters that share a client and prefix share one fleet, one
// heartbeat and one member: they are one process.
type fleet struct {
	key, id string
	// count is the number of processes live at the latest heartbeat that
	// Redis answered; 0 before any.
	count atomic.Int64
	// beats counts the heartbeats Redis answered (for tests).
	beats atomic.Int64

	client redis.UniversalClient
	// members are the limiters in the heartbeat; guarded by fleets.mu.
	members map[*redisBackend]struct{}
	// cancel stops the heartbeat, which closes done when it has ended.
	cancel context.CancelFunc
	done   chan struct{}
}

// fleetKey names a heartbeat: a client and a prefix.
type fleetKey struct {
	client redis.UniversalClient
	prefix string
}

// fleets are the heartbeats running in the process.
var fleets = struct {
	mu sync.Mutex
	m  map[fleetKey]*fleet
}{m: map[fleetKey]*fleet{}}

// newFleet returns heartbeat state for a limiter with prefix, in no
// heartbeat.
func newFleet(prefix string) *fleet {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// One key, with a hash tag of its own, so that it lives on one master
	// of a cluster; no storage key has a tag without a colon in it.
	return &fleet{key: prefix + "{processes}", id: hex.EncodeToString(b[:])}
}

// joinFleet puts l in the heartbeat of its client and prefix, starting it
// if l is the first limiter there.
func (l *redisBackend) joinFleet() {
	fleets.mu.Lock()
	defer fleets.mu.Unlock()
	k := fleetKey{l.client, l.prefix}
	f := fleets.m[k]
	if f == nil {
		f = newFleet(l.prefix)
		f.client, f.members = l.client, map[*redisBackend]struct{}{}
		ctx, cancel := context.WithCancel(context.Background())
		f.cancel, f.done = cancel, make(chan struct{})
		fleets.m[k] = f
		go f.heartbeat(ctx, k)
	}
	f.members[l] = struct{}{}
	l.fleet = f
}

// leaveFleet takes l out of its heartbeat; the last limiter to leave stops
// it, waits for it to end and removes the process's member from Redis.
func (l *redisBackend) leaveFleet() {
	fleets.mu.Lock()
	f := l.fleet
	if _, ok := f.members[l]; !ok {
		fleets.mu.Unlock()
		return
	}
	delete(f.members, l)
	last := len(f.members) == 0
	if last && fleets.m[fleetKey{l.client, l.prefix}] == f {
		delete(fleets.m, fleetKey{l.client, l.prefix})
	}
	fleets.mu.Unlock()
	if last {
		f.cancel()
		<-f.done
	}
}

// processes returns how many processes share the limits in the local
// fallback: WithFallbackProcesses's n, else the count of processes the
// heartbeat last read, at least 1.
func (l *redisBackend) processes() int {
	if l.fallbackProcesses > 0 {
		return l.fallbackProcesses
	}
	return int(max(l.fleet.count.Load(), 1))
}

// heartbeat beats every heartbeatEvery until ctx ends (the last limiter
// in it is closed), then removes the process's member; or until the
// client is closed. It skips beats while the breaker of a limiter in it is
// open: the count read before the outage stands, and the pool is not made
// to fail dials.
func (f *fleet) heartbeat(ctx context.Context, k fleetKey) {
	defer close(f.done)
	for {
		if !f.paused() {
			if err := f.beat(ctx); errors.Is(err, redis.ErrClosed) {
				fleets.mu.Lock()
				if fleets.m[k] == f {
					delete(fleets.m, k)
				}
				fleets.mu.Unlock()
				return
			}
		}
		select {
		case <-ctx.Done():
			f.remove()
			return
		case <-time.After(heartbeatEvery):
		}
	}
}

// paused reports whether the breaker of a limiter in the heartbeat is
// open.
func (f *fleet) paused() bool {
	fleets.mu.Lock()
	defer fleets.mu.Unlock()
	for l := range f.members {
		if l.breaker != nil && l.breaker.open() {
			return true
		}
	}
	return false
}

// remove removes the process's member, so that the others stop counting
// it at their next beat, within a second at most.
func (f *fleet) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = f.client.ZRem(ctx, f.key, f.id).Err()
}

// beat renews the process's member, drops the members that expired and
// reads how many are left, in one MULTI/EXEC on one key (no script: the
// scores are the process's clock).
func (f *fleet) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, heartbeatTTL)
	defer cancel()
	now := time.Now().UnixMilli()
	pipe := f.client.TxPipeline()
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
