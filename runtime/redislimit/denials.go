package redislimit

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/denied"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The fleet's most-denied keys (ratelimit.OpTopDenied): each process
// counts its rules' denials in memory (denied.Pending) and, every
// denialFlush, merges them into a Space-Saving summary per minute kept in
// Redis, of at most denied.Slots keys:
//
//	<prefix>{denied}:<minute>       a sorted set: member → denials
//	<prefix>{denied}:<minute>:err   a sorted set: member → error
//
// (the member is the key's digest flag, the rule's name and the key),
// which expire after the minutes listed. So any process lists the
// denials of every process, up to the last denialFlush of each.
const denialFlush = time.Second

// mergeDenialsScript merges a process's pending counts of one minute into
// the minute's summary, Space-Saving, so counts only ever overestimate, by
// at most their error (see lua/merge_denials.lua.tmpl). KEYS: the
// summary's two keys (deniedKeys); ARGV: its size, its TTL in seconds,
// then member, count and error of each key.
var (
	mergeDenialsText   = renderScript("merge_denials.lua.tmpl", scriptData{})
	mergeDenialsScript = redis.NewScript(sendable(mergeDenialsText))
)

// denialLog is a Redis limiter's pending denials and the goroutine that
// merges them.
type denialLog struct {
	pending denied.Pending
	// minute is the wall clock's minute (since the Unix epoch) that
	// denials count in, which the timer turn turns at each minute's end.
	minute atomic.Int64
	turn   atomic.Pointer[time.Timer]
	start  sync.Once
	stop   chan struct{}
	done   chan struct{}
}

// deniedKeys returns the Redis keys of the summary of minute.
func deniedKeys(prefix string, minute int64) []string {
	k := prefix + "{denied}:" + strconv.FormatInt(minute, 10)
	return []string{k, k + ":err"}
}

// member encodes an entry's identity as a sorted set member.
func member(e denied.Entry) string {
	flag := "0"
	if e.Hashed {
		flag = "1"
	}
	return flag + "\x00" + e.Name + "\x00" + e.Key
}

// parseMember decodes member.
func parseMember(m string) (denied.Entry, bool) {
	flag, rest, ok := strings.Cut(m, "\x00")
	if !ok {
		return denied.Entry{}, false
	}
	name, key, ok := strings.Cut(rest, "\x00")
	return denied.Entry{Name: name, Key: key, Hashed: flag == "1"}, ok
}

// wallTime returns the time on the limiter's clock, or the process's.
func (l *redisBackend) wallTime() time.Time {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now()
	}
	return time.Now()
}

// CountDenial counts a denial, to merge into Redis within denialFlush.
// See [ratelimit.OpTopDenied].
func (l *redisBackend) CountDenial(name, key string, hashed bool) {
	l.denials.start.Do(l.startDenials)
	l.denials.pending.Add(name, key, hashed, l.denialTime())
}

// startDenials starts the merge loop and the turns of the minute.
func (l *redisBackend) startDenials() {
	l.denials.stop, l.denials.done = make(chan struct{}), make(chan struct{})
	l.turnMinute()
	go l.mergeLoop()
}

// denialTime returns the time a denial counts at: the limiter's clock's,
// else the start of the minute turnMinute last turned to, which saves a
// read of the clock per denial and is late by as much as a timer fires
// late (a few ms under load) at each minute's end.
func (l *redisBackend) denialTime() time.Time {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now()
	}
	return time.Unix(l.denials.minute.Load()*60, 0)
}

// turnMinute sets the minute denials count in to the wall clock's, and
// has a timer call it again when that minute ends, until stopDenials.
func (l *redisBackend) turnMinute() {
	select {
	case <-l.denials.stop:
		return
	default:
	}
	now := time.Now()
	l.denials.minute.Store(now.Unix() / 60)
	next := time.Unix((now.Unix()/60+1)*60, 0)
	l.denials.turn.Store(time.AfterFunc(next.Sub(now), l.turnMinute))
}

// mergeLoop merges the pending denials every denialFlush until Close.
func (l *redisBackend) mergeLoop() {
	defer close(l.denials.done)
	t := time.NewTicker(denialFlush)
	defer t.Stop()
	for {
		select {
		case <-l.denials.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), denialFlush)
			_ = l.flushDenials(ctx) // counts that fail are dropped: they are a view
			cancel()
		}
	}
}

// stopDenials stops the merge loop, if it runs, and waits for it.
func (l *redisBackend) stopDenials() {
	l.denials.start.Do(func() {}) // none starts after
	if l.denials.stop != nil {
		select {
		case <-l.denials.stop:
		default:
			close(l.denials.stop)
		}
		l.denials.turn.Load().Stop() // one that turns after sees stop
		<-l.denials.done
	}
}

// flushDenials merges the pending denials into Redis, one script run per
// minute, in one pipeline.
func (l *redisBackend) flushDenials(ctx context.Context) error {
	byMinute := l.denials.pending.Drain()
	if len(byMinute) == 0 {
		return nil
	}
	ttl := strconv.Itoa((denied.Minutes + 1) * 60)
	pipe := l.client.Pipeline()
	for minute, entries := range byMinute {
		args := []any{denied.Slots, ttl}
		for _, e := range entries {
			args = append(args, member(e), e.Count, e.Error)
		}
		mergeDenialsScript.Eval(ctx, pipe, deniedKeys(l.prefix, minute), args...)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// TopDenied merges this process's pending denials, then returns the most
// denied keys of every process of the fleet over the last minutes. See
// [ratelimit.OpTopDenied].
func (l *redisBackend) TopDenied(ctx context.Context, n int) ([]ratelimit.DeniedKey, error) {
	if err := l.flushDenials(ctx); err != nil {
		return nil, backendError("denied", err)
	}
	now := l.wallTime().Unix() / 60
	pipe := l.client.Pipeline()
	type read struct{ counts, errs *redis.ZSliceCmd }
	var reads []read
	for m := now - denied.Minutes + 1; m <= now; m++ {
		keys := deniedKeys(l.prefix, m)
		reads = append(reads, read{pipe.ZRangeWithScores(ctx, keys[0], 0, -1), pipe.ZRangeWithScores(ctx, keys[1], 0, -1)})
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, backendError("denied", err)
	}
	var all []denied.Entry
	for _, r := range reads {
		errs := map[string]int64{}
		for _, z := range r.errs.Val() {
			errs[z.Member.(string)] = int64(z.Score)
		}
		for _, z := range r.counts.Val() {
			m := z.Member.(string)
			e, ok := parseMember(m)
			if !ok {
				continue
			}
			e.Count, e.Error = int64(z.Score), errs[m]
			all = append(all, e)
		}
	}
	top := denied.Merge(all, n)
	out := make([]ratelimit.DeniedKey, len(top))
	for i, e := range top {
		out[i] = ratelimit.DeniedKey{Name: e.Name, Key: ratelimit.RedactKey(e.Key, e.Hashed), Kept: e.Key, Denials: e.Count, Error: e.Error}
	}
	return out, nil
}
