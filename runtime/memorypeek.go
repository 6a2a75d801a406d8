package ratelimit

import (
	"context"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/limitstate"
)

// The memory limiter's peeks and resets (see [OpPeek], [OpReset]).

// peeked turns the decision an uncharged call of req got into Peek's: an
// admitted call's Remaining counts its cost too.
func peeked(req *Request, d Decision) Decision {
	if d.Allowed {
		d.Remaining += req.UnitsOf(d.LimitIndex)
	}
	return d
}

// Peek checks req's limits without charging them. See [Peek].
func (l *MemoryLimiter) Peek(ctx context.Context, req Request) (Decision, error) {
	for _, lim := range req.Limits {
		if lim.Algorithm == limitfacts.Concurrency {
			return Peek(ctx, l, req) // by PeekSlot, with the slot's numbers
		}
	}
	if req.Keys != nil {
		var d Decision
		if _, err := l.decideKeys(context.Background(), &req, false, 0, &d); err != nil {
			return Decision{}, err
		}
		return peeked(&req, d), nil
	}
	d, err := l.peekOne(&req)
	if err != nil {
		return Decision{}, err
	}
	return peeked(&req, d), nil
}

// peekOne decides req, which has one key, without charging it or keeping
// a new pair's state: Allow's decision, not Peek's.
func (l *MemoryLimiter) peekOne(req *Request) (Decision, error) {
	if err := req.Validate(); err != nil {
		return Decision{}, err
	}
	mr := l.ruleOf(req)
	key := callkey.Named(req.Key)
	hash := l.hashOf(req.Name, key, mr)
	now := l.now()
	shard := l.shardOf(hash)
	shard.mu.Lock()
	e := shard.find(req.Name, key, hash)
	if e == nil {
		e = &memoryEntry{} // a new pair's state, not kept
	}
	if len(e.limits) < len(req.Limits) {
		e.limits = append(e.limits, make([]limitstate.State, len(req.Limits)-len(e.limits))...)
	}
	var d Decision
	var buf [4]limitstate.Plan
	e.decidePlans(plansOf(req, mr, &buf, 0), req.Units(), now, false, &d)
	shard.mu.Unlock()
	return d, nil
}

// Reset forgets the state of name and key. See [OpReset].
func (l *MemoryLimiter) Reset(_ context.Context, name, key string) error {
	key = callkey.Named(key)
	hash := l.hashOf(name, key, nil)
	shard := l.shardOf(hash)
	shard.mu.Lock()
	shard.remove(name, key, hash)
	shard.mu.Unlock()
	l.slots.mu.Lock()
	delete(l.slots.held, [2]string{name, key})
	l.slots.mu.Unlock()
	l.cools.mu.Lock()
	for line := range l.cools.ends {
		if line.name == name && line.key == key {
			delete(l.cools.ends, line)
		}
	}
	l.cools.mu.Unlock()
	return nil
}
