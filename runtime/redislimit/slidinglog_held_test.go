package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// heldReservation is a reservation of heldAgree not yet settled: held
// with hold, or plain (hold 0).
type heldReservation struct {
	req  ratelimit.Request
	at   time.Time
	hold time.Duration
}

// TestHeldLogBackendsAgree: held reservations (ratelimit.OpReserveHeld) of
// sliding logs, beside plain calls and reservations, refunded in part or
// in full, with plain refunds and debts, on a clock that sometimes steps
// back, are decided, timed and refunded by the reserve and adjust scripts
// as the twin does (denials' retries through held entries too), Peek
// agrees, and every log keeps its count right.
func TestHeldLogBackendsAgree(t *testing.T) {
	standalone := func(t *testing.T, clock ratelimit.Clock) *Limiter {
		return newTestRedis(t, ratelimit.WithClock(clock))
	}
	for _, set := range heldLogSets() {
		t.Run(set.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 4; seed++ {
				untilCalm(t, stalledMsg, func() bool { return heldAgree(t, set, seed, standalone, false) })
				requireLogsCounted(t, rdb(t))
			}
		})
	}
}

// heldLinesAgree: on a cluster, held reservations of calls with a key per
// limit, each on a hash tag of its own (decided per group, a group's
// charge refunded when another denies: a held entry too), agree with the
// twin as on one server.
func (ct *clusterTest) heldLinesAgree(t *testing.T) {
	cluster := func(t *testing.T, clock ratelimit.Clock) *Limiter {
		l, _ := ct.limiter(t, ratelimit.WithClock(clock), WithDenyCache(0))
		return l
	}
	for _, set := range heldLogSets() {
		t.Run(set.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 2; seed++ {
				untilCalm(t, stalledMsg, func() bool { return heldAgree(t, set, seed, cluster, true) })
			}
		})
	}
}

// heldLogSets are the sets of TestHeldLogBackendsAgree: sliding logs
// alone, on a clock stepping back, and beside a fixed window.
func heldLogSets() []agreeSet {
	return []agreeSet{
		{name: "log", limits: []ratelimit.Limit{{Period: 200 * time.Millisecond, Threshold: 60, Algorithm: ratelimit.SlidingLog}}, maxCost: 12},
		{name: "log/skew", limits: []ratelimit.Limit{{Period: 20 * time.Millisecond, Threshold: 60, Algorithm: ratelimit.SlidingLog}}, maxCost: 12, skew: true},
		{name: "log+window", limits: []ratelimit.Limit{
			{Period: 100 * time.Millisecond, Threshold: 40, Algorithm: ratelimit.SlidingLog},
			{Period: time.Second, Threshold: 300, Algorithm: ratelimit.FixedWindow},
			{Period: 400 * time.Millisecond, Threshold: 90, Algorithm: ratelimit.SlidingLog},
		}, maxCost: 9},
	}
}

// heldAgree runs seed's sequence of set for TestHeldLogBackendsAgree on
// the limiter newRed makes, the calls with a key per limit (each on a hash
// tag of its own) when keyed is set, and returns false if it stalled in
// real time (see realTimeGuard).
func heldAgree(t *testing.T, set agreeSet, seed uint64, newRed func(*testing.T, ratelimit.Clock) *Limiter, keyed bool) (calm bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, uint64(len(set.name))+11))
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	red := newRed(t, clock)
	back := guarded{red.redisBackend}
	guard := newRealTimeGuard(clock, set.all()...)
	minPeriod := set.limits[0].Period
	for _, lim := range set.limits {
		minPeriod = min(minPeriod, lim.Period)
	}
	var open []heldReservation
	held, refunds, denied := 0, 0, 0
	for i := range 400 {
		heldStep(rng, clock, set, minPeriod)
		req := set.request(rng, set.limits)
		if keyed {
			req.Keys = make([]string, len(req.Limits))
			for j := range req.Keys {
				req.Keys[j] = fmt.Sprintf("{t%d}%s", j, req.Key)
			}
			req.Key = ""
		}
		guard.start()
		switch op := rng.IntN(10); {
		case op < 4 && len(open) > 0: // settle one
			j := rng.IntN(len(open))
			r := open[j]
			open = append(open[:j], open[j+1:]...)
			units := r.req.Units()
			if r.hold > 0 {
				n := rng.Int64N(units + 1)
				require.NoError(t, mem.RefundHeld(ctx, r.req, r.at, r.hold, n))
				require.NoError(t, back.RefundHeld(ctx, r.req, r.at, r.hold, n))
				refunds++
				break
			}
			delta := rng.Int64N(units+1) - units
			if rng.IntN(3) == 0 {
				delta = rng.Int64N(set.maxCost + 1) // a debt
			}
			require.NoError(t, mem.Adjust(ctx, r.req, r.at, delta))
			require.NoError(t, red.Adjust(ctx, r.req, r.at, delta))
		case op < 7: // a held reservation
			req.Cost = 2 + rng.Int64N(set.maxCost-1)
			hold := time.Duration(1+rng.Int64N(int64(minPeriod/4/time.Microsecond))) * time.Microsecond
			dm, am, err := mem.ReserveHeld(ctx, req, hold)
			require.NoError(t, err)
			dr, ar, err := back.ReserveHeld(ctx, req, hold)
			require.NoError(t, err)
			if guard.stalled() {
				return false
			}
			require.Equal(t, dm, dr, "held call %d at %s: %+v, hold %v", i, clock.Now().Format(time.StampMicro), req, hold)
			if dm.Allowed {
				require.Equal(t, am, ar, "held call %d: the time charged at", i)
				open = append(open, heldReservation{req, am, hold})
				held++
			} else {
				denied++
			}
		case op < 9: // a plain reservation
			dm, am, err := mem.Reserve(ctx, req)
			require.NoError(t, err)
			dr, ar, err := red.Reserve(ctx, req)
			require.NoError(t, err)
			if guard.stalled() {
				return false
			}
			require.Equal(t, dm, dr, "call %d at %s: %+v", i, clock.Now().Format(time.StampMicro), req)
			if dm.Allowed {
				require.Equal(t, am, ar, "call %d: the time charged at", i)
				open = append(open, heldReservation{req, am, 0})
			} else {
				denied++
			}
		default: // a plain call, and a peek
			pm, err := mem.Peek(ctx, req)
			require.NoError(t, err)
			pr, err := red.Peek(ctx, req)
			require.NoError(t, err)
			require.Equal(t, pm, pr, "peek %d: %+v", i, req)
			dm := allow(t, mem, req)
			require.Equal(t, dm, allow(t, red, req), "call %d at %s: %+v", i, clock.Now().Format(time.StampMicro), req)
		}
	}
	require.NotZero(t, held)
	require.NotZero(t, refunds)
	require.NotZero(t, denied, "the sequence should reach the limit")
	return true
}

// heldStep moves clock on by up to a fortieth of the shortest period
// (now and then by up to two periods, or not at all; with skew, now and
// then back by up to a period): the logs fill, and held entries leave
// behind the plain ones logged after them.
func heldStep(rng *rand.Rand, clock *manualClock, set agreeSet, minPeriod time.Duration) {
	us := int64(time.Microsecond)
	switch r := rng.IntN(50); {
	case r < 5:
	case r < 7:
		clock.Advance(time.Duration(rng.Int64N(2*int64(minPeriod)/us) * us))
	default:
		clock.Advance(time.Duration(rng.Int64N(int64(minPeriod)/40/us) * us))
	}
	if set.skew && rng.IntN(10) == 0 {
		clock.Advance(-time.Duration(rng.Int64N(int64(minPeriod)/us) * us))
	}
}

// TestHeldLogKeyOutlivesEveryEntry: a sliding log holding held entries,
// among plain calls, held reservations refunded in part or in full and
// pauses that empty it, keeps a TTL that outlives every entry: the key
// would expire at least a second after the last of them stops counting
// (its time, plus its hold, plus a period), which a TTL of two periods
// past the marked entry would not.
func TestHeldLogKeyOutlivesEveryEntry(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	red := newTestRedis(t, ratelimit.WithClock(clock))
	back := guarded{red.redisBackend}
	c := rdb(t)
	lim := ratelimit.Limit{Period: 20 * time.Second, Threshold: 60, Algorithm: ratelimit.SlidingLog}
	req := ratelimit.Request{Name: "outlive", Limits: []ratelimit.Limit{lim}}
	key := red.Key("outlive", "", 0, ratelimit.SlidingLog)
	rng := rand.New(rand.NewPCG(3, 9))
	var expiry int64 // µs, pinned time: when the key would expire
	sets, helds := 0, 0
	for i := range 800 {
		step := time.Duration(rng.Int64N(int64(2 * time.Second)))
		if i%113 == 112 {
			step = 3 * lim.Period // the log empties
		}
		clock.Advance(step)
		switch rng.IntN(3) {
		case 0:
			r := req
			r.Cost = 2 + rng.Int64N(8)
			hold := lim.Period/4 - time.Duration(rng.Int64N(int64(time.Second)))
			d, at, err := back.ReserveHeld(ctx, r, hold)
			require.NoError(t, err)
			if d.Allowed {
				helds++
				if rng.IntN(2) == 0 {
					require.NoError(t, back.RefundHeld(ctx, r, at, hold, rng.Int64N(r.Cost+1)))
				}
			}
		default:
			r := req
			r.Cost = 1 + rng.Int64N(3)
			allow(t, red, r)
		}
		now := clock.Now().UnixMicro()
		if ttl := c.PTTL(ctx, key).Val(); ttl > 0 {
			expiry, sets = now+ttl.Microseconds(), sets+1
			require.NoError(t, c.Persist(ctx, key).Err())
		}
		list, err := c.LRange(ctx, key, 0, -1).Result()
		require.NoError(t, err)
		for _, e := range list {
			if e[0] == '#' || e[0] == '!' {
				continue
			}
			at, _, hold, _ := parseHeldEntry(t, e)
			require.GreaterOrEqual(t, expiry, at+hold+lim.Period.Microseconds()+time.Second.Microseconds()-1000,
				"call %d: the key would expire before its entry %q stops counting", i, e)
		}
	}
	require.NotZero(t, helds)
	t.Logf("%d held reservations; the TTL set %d times in 800 calls", helds, sets)
}

// TestHeldLogTTLOutlivesAnEntryAHeldOneKeptBehindIt: a plain call sets
// the TTL (its trim popped the marked entry) while a held entry logged
// before it still counts, and keeps its entry from leaving: a call a
// period later is not trimmed, sets no TTL, and counts until after two
// periods past the marked entry. The key must outlive it (a held log's
// TTL spans two and a half periods).
func TestHeldLogTTLOutlivesAnEntryAHeldOneKeptBehindIt(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	red := newTestRedis(t, ratelimit.WithClock(clock))
	back := guarded{red.redisBackend}
	c := rdb(t)
	lim := ratelimit.Limit{Period: 20 * time.Second, Threshold: 60, Algorithm: ratelimit.SlidingLog}
	req := ratelimit.Request{Name: "behind", Limits: []ratelimit.Limit{lim}}
	key := red.Key("behind", "", 0, ratelimit.SlidingLog)
	start := clock.Now()
	at := func(d time.Duration) { clock.Advance(start.Add(d).Sub(clock.Now())) }
	require.True(t, allow(t, red, req).Allowed) // marked, at 0
	at(19 * time.Second)
	held := req
	held.Cost = 3
	d, _, err := back.ReserveHeld(ctx, held, 5*time.Second) // counts until 44s
	require.NoError(t, err)
	require.True(t, d.Allowed)
	at(20500 * time.Millisecond)
	require.True(t, allow(t, red, req).Allowed) // pops the entry at 0: sets the TTL
	expiry := clock.Now().Add(c.PTTL(ctx, key).Val())
	require.NoError(t, c.Persist(ctx, key).Err()) // a TTL read later is a later call's
	at(43900 * time.Millisecond)
	require.True(t, allow(t, red, req).Allowed) // the held entry keeps the one at 20.5s: no trim
	require.Equal(t, time.Duration(-1), c.PTTL(ctx, key).Val(), "the call set no TTL")
	require.False(t, expiry.Before(clock.Now().Add(lim.Period+time.Second)),
		"the key expires at %v, before the call at 43.9s stops counting (63.9s) and a second", expiry.Sub(start))
}
