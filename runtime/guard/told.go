package guard

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// toldSlots is how many lines the fallback remembers what the backend last
// told of: a line whose slot another line took is decided from its full
// share, as if nothing had been told of it.
const toldSlots = 1 << 12

// toldLines remembers, per line (a limit's state: its name, index and key),
// what the backend last told a call of it was left, and until when that
// holds, so that a fallback which starts deciding mid-window spends only
// its process's share of what is left there, not its share of the whole
// limit. It is a direct-mapped table: a record costs one hash and one
// uncontended lock, and no allocation.
type toldLines struct {
	hashSeed maphash.Seed
	slots    [toldSlots]toldSlot
}

// toldSlot is one line's last answer.
type toldSlot struct {
	mu    sync.Mutex
	name  string
	key   string
	index int
	// remaining is what the backend told was left of the line at the
	// time of the answer; until (µs) is when that no longer holds: when
	// the limit would be fully available again.
	remaining int64
	until     int64
	// seeded is set once the fallback spent what was told.
	seeded bool
}

func newToldLines() *toldLines { return &toldLines{hashSeed: maphash.MakeSeed()} }

// line returns the line of req's limit i: its state's name, index and key.
func line(req *ratelimit.Request, i int) (name string, index int, key string) {
	name, index = req.Line(i)
	if req.Keys != nil {
		return name, index, req.Keys[i]
	}
	return name, index, req.Key
}

// slot returns the slot of a line.
func (t *toldLines) slot(name string, index int, key string) *toldSlot {
	h := maphash.String(t.hashSeed, name) ^ maphash.String(t.hashSeed, key) + uint64(index)
	return &t.slots[h%toldSlots]
}

// record remembers what d, the backend's decision of req at now (µs),
// told of the line it describes: its Remaining, until its ResetAfter ends.
// A decision of a limit that is fully available tells nothing to keep.
func (t *toldLines) record(req *ratelimit.Request, d *ratelimit.Decision, now int64) {
	i := d.LimitIndex
	if d.ResetAfter <= 0 || i < 0 || i >= len(req.Limits) {
		return
	}
	name, index, key := line(req, i)
	s := t.slot(name, index, key)
	s.mu.Lock()
	s.name, s.index, s.key = name, index, key
	s.remaining, s.until, s.seeded = d.Remaining, now+d.ResetAfter.Microseconds(), false
	s.mu.Unlock()
}

// unspent returns what the backend last told was left of req's limit i,
// if that still holds at now and the fallback has not spent it yet, and
// marks it spent.
func (t *toldLines) unspent(req *ratelimit.Request, i int, now int64) (int64, bool) {
	name, index, key := line(req, i)
	s := t.slot(name, index, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seeded || s.name != name || s.index != index || s.key != key || now >= s.until {
		return 0, false
	}
	s.seeded = true
	return max(s.remaining, 0), true
}

// seed charges local, before it decides share (req with each limit
// replaced by this process's share of it, of n processes), what the
// backend told was no longer left of each limit: the share less the
// share of what was left (remaining / n), so that a fallback starting
// mid-window admits at most its share of what was left. It charges at now,
// which for a window is the window told of (the answer still holds) and
// for the others weighs no shorter than the charges it stands for.
func (t *toldLines) seed(ctx context.Context, local *ratelimit.MemoryLimiter, share *ratelimit.Request, n int, now int64) {
	for i, lim := range share.Limits {
		if lim.PerCall {
			continue
		}
		left, ok := t.unspent(share, i, now)
		if !ok {
			continue
		}
		if spent := lim.MaxCost() - left/int64(n); spent > 0 {
			_ = local.Adjust(ctx, only(share, i), time.UnixMicro(now), spent)
		}
	}
}

// only returns req with every limit but i marked as counting calls, which
// an adjustment leaves as they are: an adjustment of limit i alone, whose
// state stays where a decision of req keeps it.
func only(req *ratelimit.Request, i int) ratelimit.Request {
	one := *req
	one.Cost, one.Rule = 0, nil
	one.Limits = append([]ratelimit.Limit(nil), req.Limits...)
	for j := range one.Limits {
		one.Limits[j].PerCall = j != i
	}
	return one
}
