package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ttlBound returns the longest TTL lua/decide.lua.tmpl documents for a key of
// lim: a second past the latest time its state can matter, counted from
// the write that sets the TTL, plus a millisecond of rounding.
func ttlBound(lim Limit) time.Duration {
	p := lim.Period
	switch lim.algorithm() {
	case FixedWindow:
		p = lim.Period // the end of the window
	case TokenBucket, GCRA, LeakyBucket:
		// The end of the second the TAT is in, which is at most a full
		// bucket's drain time ahead.
		q, _ := mulDivRem(lim.capacity(), lim.Period.Microseconds(), lim.Threshold)
		p = time.Duration(q+1)*us + time.Second
	default:
		p = 2 * lim.Period // a log's newest entry, or the next window's end
	}
	return p + time.Second + time.Millisecond
}

// TestEveryKeyOutlivesItsStateWithinTheDocumentedTTL runs random calls of
// every algorithm on Redis with a pinned clock, and the same calls on the
// in-process twin, which knows when each key's state stops mattering. Every
// key must have a TTL of at least a second past that time and at most the
// documented bound.
func TestEveryKeyOutlivesItsStateWithinTheDocumentedTTL(t *testing.T) {
	ctx := context.Background()
	for _, alg := range Algorithms() {
		for _, lim := range []Limit{
			{Algorithm: alg, Period: 30 * time.Second, Threshold: 5},
			{Algorithm: alg, Period: time.Second, Threshold: 3},
			{Algorithm: alg, Period: 10 * time.Millisecond, Threshold: 4},
		} {
			t.Run(lim.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(lim.Period), 3))
				clock := newManualClock()
				red := newTestRedis(t, WithClock(clock))
				mem := NewMemory(WithClock(clock))
				c := rdb(t)
				began := time.Now() // TTLs run down in real time
				for range 200 {
					clock.Advance(time.Duration(rng.Int64N(int64(lim.Period/us)/4+1)) * us)
					req := Request{Name: "ttl", Key: fmt.Sprint(rng.IntN(4)), Cost: 1 + rng.Int64N(2), Limits: []Limit{lim}}
					require.Equal(t, allow(t, mem, req), allow(t, red, req))
				}
				now := clock.Now().UnixMicro()
				keys := c.Keys(ctx, "*").Val()
				slack := time.Since(began) + time.Millisecond
				require.NotEmpty(t, keys)
				for k := range 4 {
					key := red.Key("ttl", fmt.Sprint(k), 0, lim.Algorithm)
					ttl := c.PTTL(ctx, key).Val()
					ek := entryKey{"ttl", fmt.Sprint(k)}
					e := mem.shards[mem.shardOf(ek)].entries[ek]
					if e == nil || e.expiry <= now {
						continue // no state that still matters; the key may be gone
					}
					matters := time.Duration(e.expiry-now) * us
					assert.GreaterOrEqual(t, ttl, matters+time.Second-slack, "%s: state matters for %s", key, matters)
					assert.LessOrEqual(t, ttl, ttlBound(lim), key)
				}
				for _, key := range keys {
					ttl := c.PTTL(ctx, key).Val()
					assert.GreaterOrEqual(t, ttl, time.Second-slack, key)
					assert.LessOrEqual(t, ttl, ttlBound(lim), key)
				}
			})
		}
	}
}

// TestEveryKeyHasATTLOnServerTime is the same run on the Redis server's
// clock, as in production, with a limit of each algorithm in one call.
func TestEveryKeyHasATTLOnServerTime(t *testing.T) {
	ctx := context.Background()
	l := newTestRedis(t)
	c := rdb(t)
	var limits []Limit
	for _, alg := range Algorithms() {
		limits = append(limits, Limit{Algorithm: alg, Period: 2 * time.Second, Threshold: 5})
	}
	for i := range 40 {
		_, err := l.Allow(ctx, Request{Name: "ttl", Key: fmt.Sprint(i % 3), Limits: limits})
		require.NoError(t, err)
	}
	keys := c.Keys(ctx, "*").Val()
	require.Len(t, keys, 3*len(limits))
	for _, key := range keys {
		ttl := c.PTTL(ctx, key).Val()
		assert.GreaterOrEqual(t, ttl, 900*time.Millisecond, key)
		assert.LessOrEqual(t, ttl, ttlBound(limits[0])+time.Second, key)
	}
}
