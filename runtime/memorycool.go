package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// The memory limiter's cooldowns (see [OpCool]).

// coolTable is the cooldowns a [MemoryLimiter] keeps: the end (µs) of
// each cooling line's key.
type coolTable struct {
	mu   sync.Mutex
	ends map[coolLine]int64
}

// coolLine is a line's key: the state [Request.Line] names, under a key.
type coolLine struct {
	name  string
	index int
	key   string
}

// maxCoolLines bounds the cooldowns a memory limiter keeps; past it, the
// ended ones are dropped, and a new one is refused when none has ended.
const maxCoolLines = 1 << 16

// lineOf returns the line of limit i of req.
func lineOf(req *Request, i int) coolLine {
	name, index := req.Line(i)
	key := req.Key
	if req.Keys != nil {
		key = req.Keys[i]
	}
	return coolLine{name: name, index: index, key: callkey.Named(key)}
}

// Cool records a cooldown of limit i of req. See [OpCool].
func (l *MemoryLimiter) Cool(_ context.Context, req Request, i int, d time.Duration) error {
	if i < 0 || i >= len(req.Limits) || (req.Keys != nil && len(req.Keys) != len(req.Limits)) {
		return fmt.Errorf("%w: %s: no limit %d to cool", ErrInvalidLimit, req.Name, i)
	}
	if d <= 0 {
		return nil
	}
	now := l.now()
	end := now + min(d, MaxCooldown).Microseconds()
	line := lineOf(&req, i)
	t := &l.cools
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ends == nil {
		t.ends = make(map[coolLine]int64)
	}
	if len(t.ends) >= maxCoolLines {
		for k, e := range t.ends {
			if e <= now {
				delete(t.ends, k)
			}
		}
		if _, ok := t.ends[line]; !ok && len(t.ends) >= maxCoolLines {
			return fmt.Errorf("%w: %s: %d lines cool already", ErrBackend, req.Name, maxCoolLines)
		}
	}
	if end > t.ends[line] {
		t.ends[line] = end
	}
	return nil
}

// Cooling returns the limit of req that cools longest. See [OpCooling].
func (l *MemoryLimiter) Cooling(_ context.Context, req Request) (int, time.Duration, error) {
	if req.Keys != nil && len(req.Keys) != len(req.Limits) {
		return -1, 0, fmt.Errorf("%w: %s: %d keys for %d limits", ErrInvalidLimit, req.Name, len(req.Keys), len(req.Limits))
	}
	t := &l.cools
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ends) == 0 {
		return -1, 0, nil
	}
	now := l.now()
	pick, last := -1, now
	for i, lim := range req.Limits {
		if !lim.Cooldown {
			continue
		}
		if end := t.ends[lineOf(&req, i)]; end > last {
			pick, last = i, end
		}
	}
	if pick < 0 {
		return -1, 0, nil
	}
	return pick, time.Duration(last-now) * time.Microsecond, nil
}
