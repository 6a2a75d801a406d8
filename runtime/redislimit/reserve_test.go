package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// reservation is one admitted reservation of the differential test, not
// yet settled.
type reservation struct {
	req ratelimit.Request
	at  time.Time
}

// TestReserveSettleBackendsAgree feeds the same random sequence of
// reservations and settles (refunds, exact settles and debts, with
// random costs and time steps) to both backends on a pinned clock, for
// every algorithm alone and in mixed sets, and requires identical
// decisions and reservation times; and a Redis limiter with a small deny
// cache, whose repeated denials the twin must make too.
func TestReserveSettleBackendsAgree(t *testing.T) {
	for _, set := range agreeSets() {
		t.Run(set.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				untilCalm(t, stalledMsg, func() bool { return reserveAgree(t, set, seed) })
			}
		})
	}
}

// reserveAgree runs seed's sequence of set for
// TestReserveSettleBackendsAgree, and returns false if it stalled in real
// time (see realTimeGuard).
func reserveAgree(t *testing.T, set agreeSet, seed uint64) (calm bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, uint64(len(set.name))+7))
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	red := newTestRedis(t, ratelimit.WithClock(clock))
	// A deny cache of 4 entries, which 3 keys share, holding denials as
	// long as they last: it must agree with the twin through refunds.
	cac := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("cached:"), WithDenyCache(4), WithDenyHold(time.Hour), withoutHeartbeat())
	guard := newRealTimeGuard(clock, set.all()...)
	slack := time.Duration(0) // -1 once the clock stepped back
	var open []reservation
	admitted, denied, refunds, debts := 0, 0, 0, 0
	for i := range 300 {
		before := clock.Now()
		limits := set.step(rng, clock, i, 300)
		if clock.Now().Before(before) {
			slack = -1
		}
		guard.start()
		if len(open) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(open))
			r := open[j]
			open = append(open[:j], open[j+1:]...)
			units := r.req.Units()
			actual := rng.Int64N(units + 1) // a refund, or the reservation
			if rng.IntN(2) == 0 {
				actual = units + rng.Int64N(2*set.maxCost+2) // a debt
			}
			delta := actual - units
			require.NoError(t, mem.Adjust(ctx, r.req, r.at, delta))
			require.NoError(t, red.Adjust(ctx, r.req, r.at, delta))
			require.NoError(t, cac.Adjust(ctx, r.req, r.at, delta))
			if delta < 0 {
				refunds++
			} else if delta > 0 {
				debts++
			}
			continue
		}
		req := set.request(rng, limits)
		dm, am, err := mem.Reserve(ctx, req)
		require.NoError(t, err)
		dr, ar, err := red.Reserve(ctx, req)
		require.NoError(t, err)
		dc, _, err := cac.Reserve(ctx, req)
		require.NoError(t, err)
		if guard.stalled() {
			return false
		}
		require.Equal(t, dm, dr, "call %d at %s: %+v", i, clock.Now().Format(time.StampMicro), req)
		requireCacheAgrees(t, dm, dc, slack, "deny cache, call %d: %+v", i, req)
		if dm.Allowed {
			require.Equal(t, am, ar, "call %d: the time charged at", i)
			open = append(open, reservation{req, am})
			admitted++
		} else {
			denied++
		}
		// A plain call sees what the settles left, too.
		if rng.IntN(4) == 0 {
			probe := set.request(rng, limits)
			dm := allow(t, mem, probe)
			require.Equal(t, dm, allow(t, red, probe), "probe after call %d: %+v", i, probe)
			requireCacheAgrees(t, dm, allow(t, cac, probe), slack, "deny cache, probe after call %d: %+v", i, probe)
		}
	}
	require.NotZero(t, admitted)
	require.NotZero(t, denied, "the sequence should reach the limit")
	require.NotZero(t, refunds)
	require.NotZero(t, debts)
	return true
}

// TestReserveTimeOnServerClock checks that a limiter on the server's
// clock reserves at the server's time and settles against it.
func TestReserveTimeOnServerClock(t *testing.T) {
	ctx := context.Background()
	red := newTestRedis(t)
	lim := ratelimit.Limit{Period: time.Hour, Threshold: 10}
	req := ratelimit.Request{Name: "server-clock", Key: "k", Cost: 10, Limits: []ratelimit.Limit{lim}}
	d, at, err := red.Reserve(ctx, req)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.InDelta(t, time.Now().UnixMicro(), at.UnixMicro(), float64(time.Minute/time.Microsecond), "the server's time")
	require.False(t, allow(t, red, ratelimit.Request{Name: "server-clock", Key: "k", Limits: req.Limits}).Allowed)
	require.NoError(t, red.Adjust(ctx, req, at, -4)) // refund 4 of the 10 entries
	d = allow(t, red, ratelimit.Request{Name: "server-clock", Key: "k", Cost: 4, Limits: req.Limits})
	require.True(t, d.Allowed, fmt.Sprintf("%+v", d))
}

// TestReserveScriptsRenderAsGolden compares the reserve, adjust and queue scripts
// with their text under testdata/scripts (rewritten with -update); the
// differential test runs them.
func TestReserveScriptsRenderAsGolden(t *testing.T) {
	for name, text := range map[string]string{"reserve": reserveText, "adjust": adjustText, "queue": queueText, "queue_slot": queueSlotText} {
		matchesGolden(t, name, text)
	}
}

// TestServerTimeScriptRendersAsGoldenAndReadsTheClock compares the
// server time script with its text under testdata/scripts (rewritten with
// -update) and runs it as sent: it replies the server's clock in µs.
func TestServerTimeScriptRendersAsGoldenAndReadsTheClock(t *testing.T) {
	matchesGolden(t, "server_time", serverTimeText)
	before := time.Now().UnixMicro()
	at, err := serverTimeScript.Run(context.Background(), rdb(t), []string{"any"}).Int64()
	require.NoError(t, err)
	require.InDelta(t, before, at, float64(time.Minute/time.Microsecond), "the server's time, in µs")
}

// TestSettleALongKey: a key longer than a Redis key keeps is settled
// under the same stand-in it was reserved under, slot included.
func TestSettleALongKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		l := newLimiter()
		key := strings.Repeat("Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", 5)
		r := &ratelimit.Rule{Name: "long", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, concurrencyLimit(1, time.Minute)}}
		res, err := r.Reserve(ctx, l, 10, key)
		require.NoError(t, err)
		_, err = r.Reserve(ctx, l, 1, key)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.NoError(t, res.Settle(ctx, 4)) // six back, and the slot
		res, err = r.Reserve(ctx, l, 6, key)
		require.NoError(t, err, "the refund and the slot are the key's")
		require.NoError(t, res.Release(ctx))
	})
}

// TestAFailedSettleReachesTheHook: a settle whose backend is out of reach
// fails with ErrBackend and tells the limiter's hook (Failed), as the
// generated code, which returns the call's results all the same, relies
// on (issue 28 item 2).
func TestAFailedSettleReachesTheHook(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	c := failFastClient(t, s.Addr)
	hook := &recordingHook{}
	l := New(c, ratelimit.WithHook(hook))
	r := &ratelimit.Rule{Name: "settle_fails", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 10}}}
	res, err := r.Reserve(context.Background(), l, 5, "ada")
	require.NoError(t, err)
	s.Stop()
	err = res.Settle(context.Background(), 1)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	hook.mu.Lock()
	defer hook.mu.Unlock()
	require.Equal(t, 1, hook.failed, "the failed settle was told to the hook once")
}
