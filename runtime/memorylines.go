package ratelimit

import (
	"context"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitstate"
)

// lineSet is the state of the limits of a call with a key per limit on a
// memory limiter: limit i's state is states[i], that of limit i of the
// pair (name, Keys[i]).
type lineSet struct {
	keys    [MaxLimits]string       // the bounded keys
	names   [MaxLimits]string       // the names their states belong to
	index   [MaxLimits]int          // the index of each state there (see Request.Line)
	hashes  [MaxLimits]uint64       // their pairs' hashes
	entries [MaxLimits]*memoryEntry // their pairs' states
	shards  [MaxLimits]uint8        // the shards holding them, sorted, each once
	nShards int
}

// decideKeys is decide for a request with Keys: it locks the shards of
// every key at once, in the order of their index so that no two calls
// wait for each other, and decides all limits under them. With charge
// unset (Peek) it keeps no new state; hold holds the charge of its
// SlidingLog limits (see plansOf). It returns the time it decided at.
func (l *MemoryLimiter) decideKeys(ctx context.Context, req *Request, charge bool, hold int64, d *Decision) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	mr := l.ruleOf(req)
	var set lineSet
	n := len(req.Limits)
	for i, k := range req.Keys {
		if charge {
			set.keys[i] = callkey.Bound(k)
		} else {
			set.keys[i] = callkey.Named(k)
		}
		set.names[i], set.index[i] = req.Line(i)
		set.hashes[i] = l.hashOf(set.names[i], set.keys[i], mr)
		set.addShard(uint8(set.hashes[i] % shardCount))
	}
	for _, s := range set.shards[:set.nShards] {
		l.shards[s].mu.Lock()
	}
	now := l.now()
	max := l.cfg.MaxKeys/shardCount + 1
	if charge {
		// Room first, for every pair that is new (each once): making room
		// later could drop a pair this call already holds.
		var pending [shardCount]int
		for i := range n {
			shard := l.shardOf(set.hashes[i])
			if set.repeats(i) || shard.find(set.names[i], set.keys[i], set.hashes[i]) != nil {
				continue
			}
			p := &pending[set.hashes[i]%shardCount]
			shard.makeRoom(now, max-*p)
			*p++
		}
	}
	for i := range n {
		shard := l.shardOf(set.hashes[i])
		e := shard.find(set.names[i], set.keys[i], set.hashes[i])
		switch {
		case e == nil && charge:
			e = &memoryEntry{name: set.names[i], key: strings.Clone(set.keys[i]), next: shard.entries[set.hashes[i]]}
			shard.entries[set.hashes[i]] = e
		case e == nil:
			e = &memoryEntry{} // a new pair's state, not kept
		}
		if len(e.limits) < n { // n > set.index[i]
			e.limits = append(e.limits, make([]limitstate.State, n-len(e.limits))...)
		}
		set.entries[i] = e
	}
	var buf [4]limitstate.Plan
	set.decide(plansOf(req, mr, &buf, hold), req.Units(), now, charge, d)
	for _, s := range set.shards[:set.nShards] {
		l.shards[s].mu.Unlock()
	}
	if charge && l.cfg.Hook != nil {
		seen := *req
		seen.Keys = append([]string(nil), set.keys[:n]...)
		l.report(ctx, seen, callkey.Bound(req.Key), *d)
	}
	return now, nil
}

// repeats reports whether the pair of limit i is that of an earlier limit.
func (set *lineSet) repeats(i int) bool {
	for j := range i {
		if set.hashes[j] == set.hashes[i] && set.keys[j] == set.keys[i] && set.names[j] == set.names[i] {
			return true
		}
	}
	return false
}

// addShard adds shard s to the sorted set of the call's shards.
func (set *lineSet) addShard(s uint8) {
	i := 0
	for i < set.nShards && set.shards[i] < s {
		i++
	}
	if i < set.nShards && set.shards[i] == s {
		return
	}
	copy(set.shards[i+1:set.nShards+1], set.shards[i:set.nShards])
	set.shards[i] = s
	set.nShards++
}

// decide is memoryEntry.decidePlans with limit i's state that of
// set.entries[i], at set.index[i].
func (set *lineSet) decide(plans []limitstate.Plan, cost, now int64, charge bool, d *Decision) {
	decideLimits(plans, set.entries[:len(plans)], set.index[:len(plans)], nil, cost, now, charge, d)
}
