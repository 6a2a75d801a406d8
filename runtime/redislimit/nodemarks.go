package redislimit

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// The marks of a cluster: each master keeps each process's mark for the
// keys it holds, at <prefix>{processes-<n>}:mark:<member>, n the first
// whose hash tag lies in the master's slots. So a master that restarts
// empty, or a replica that takes over its slots having missed writes,
// lacks the process's latest mark there, and the process charges it
// again what the ledger holds of its keys (see [guard.FleetAbilities]).
// The part a mark stands for is named by its tag, which a replica that
// takes over the master's slots keeps.

// maxPartTags bounds the search for a tag in a master's slots: a master
// that holds a few slots of 16,384 is found within a few times as many
// tags, or its keys are marked at the next mark.
const maxPartTags = 1 << 16

// beatMasters renews member in the heartbeat while it writes the
// process's mark on each master (see markMasters); the error is the
// beat's.
func (l guarded) beatMasters(ctx context.Context, member string, now time.Time, ttl time.Duration, mark string) (int64, []guard.MarkRead, error) {
	var reads []guard.MarkRead
	done := make(chan struct{})
	go func() {
		defer close(done)
		reads, _ = l.markMasters(ctx, member, mark)
	}()
	n, _, err := l.beat(ctx, member, now, ttl, "")
	<-done
	return n, reads, err
}

// markMasters writes the process's mark on each master of the cluster at
// once, with the mark script, and returns the reads of the masters that
// answered (an error when none did), ordered by part.
func (l guarded) markMasters(ctx context.Context, member, mark string) ([]guard.MarkRead, error) {
	var mu sync.Mutex
	var reads []guard.MarkRead
	err := l.cluster.ForEachMaster(ctx, func(ctx context.Context, master *redis.Client) error {
		tag, err := l.partTag(ctx, master.Options().Addr)
		if err != nil {
			return err
		}
		read, err := l.markOn(ctx, master, l.prefix+"{"+tag+"}", member, mark)
		if err != nil {
			return err
		}
		read.Part, read.Node = tag, master.Options().Addr
		mu.Lock()
		defer mu.Unlock()
		reads = append(reads, read)
		return nil
	})
	if len(reads) == 0 {
		return nil, closedError(err)
	}
	slices.SortFunc(reads, func(a, b guard.MarkRead) int { return strings.Compare(a.Part, b.Part) })
	return reads, nil
}

// partTag returns the hash tag of the marks the master at addr keeps:
// processes-n, n the first whose slot the master holds, as the cluster
// client last read the slots. No storage key has a tag without a colon,
// nor does the heartbeat.
func (l guarded) partTag(ctx context.Context, addr string) (string, error) {
	for n := range maxPartTags {
		tag := "processes-" + strconv.Itoa(n)
		master, err := l.cluster.MasterForKey(ctx, "{"+tag+"}")
		if err != nil {
			return "", err
		}
		if master.Options().Addr == addr {
			return tag, nil
		}
	}
	return "", errors.New("redislimit: no slot of master " + addr + " found to mark")
}
