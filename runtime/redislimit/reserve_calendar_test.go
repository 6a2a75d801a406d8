package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestCalendarReserveSettleBackendsAgree feeds the same random
// reservations and settles (refunds, exact settles and debts) to the
// memory limiter and to Redis, plain and with a deny cache, on a pinned
// clock around each calendar boundary of TestCalendarBackendsAgree (month
// and year ends, the leap day, DST changes): reserved before a boundary
// and settled after it, or both on one side, and requires identical
// decisions, reservation times, and decisions of plain calls after the
// settles.
func TestCalendarReserveSettleBackendsAgree(t *testing.T) {
	for name, b := range calendarBoundaries(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(len(name)), 11))
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			red := newTestRedis(t, ratelimit.WithClock(clock))
			cac := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("cached:"), WithDenyCache(4), WithDenyHold(time.Hour), withoutHeartbeat())
			var times []time.Time
			for _, back := range []time.Duration{26 * time.Hour, 3 * time.Hour, time.Minute, time.Second, 3 * time.Millisecond} {
				times = append(times, b.at.Add(-back))
			}
			for range 150 {
				times = append(times, b.at.Add(time.Duration(rng.IntN(4000)-2000)*time.Microsecond))
			}
			times = append(times, b.at.Add(-time.Microsecond), b.at.Add(-time.Microsecond), b.at, b.at, b.at.Add(time.Microsecond), b.at.Add(time.Hour), b.at.Add(23*time.Hour), b.at.Add(25*time.Hour))
			var open []reservation
			admitted, denied, refunds, debts := 0, 0, 0, 0
			for i, at := range times {
				clock.Set(at)
				if len(open) > 0 && rng.IntN(2) == 0 {
					j := rng.IntN(len(open))
					r := open[j]
					open = append(open[:j], open[j+1:]...)
					units := r.req.Units()
					actual := rng.Int64N(units + 1)
					if rng.IntN(2) == 0 {
						actual = units + rng.Int64N(4)
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
				} else {
					req := ratelimit.Request{Name: "cal-settle", Key: fmt.Sprint("k", rng.IntN(2)), Cost: rng.Int64N(3), Limits: b.limits}
					dm, am, err := mem.Reserve(ctx, req)
					require.NoError(t, err)
					dr, ar, err := red.Reserve(ctx, req)
					require.NoError(t, err)
					dc, _, err := cac.Reserve(ctx, req)
					require.NoError(t, err)
					require.Equal(t, dm, dr, "call %d at %s: %+v", i, at, req)
					requireCacheAgrees(t, dm, dc, -1, "deny cache, call %d at %s", i, at)
					if dm.Allowed {
						require.Equal(t, am, ar, "call %d: the time charged at", i)
						open = append(open, reservation{req, am})
						admitted++
					} else {
						denied++
					}
				}
				probe := ratelimit.Request{Name: "cal-settle", Key: fmt.Sprint("k", rng.IntN(2)), Cost: rng.Int64N(3), Limits: b.limits}
				if rng.IntN(3) == 0 {
					dm := allow(t, mem, probe)
					require.Equal(t, dm, allow(t, red, probe), "probe after call %d at %s: %+v", i, at, probe)
					requireCacheAgrees(t, dm, allow(t, cac, probe), -1, "deny cache, probe after call %d", i)
				}
			}
			require.NotZero(t, admitted)
			require.NotZero(t, denied)
			require.NotZero(t, refunds)
			require.NotZero(t, debts)
		})
	}
}

// TestCalendarSettleAcrossMonthEnd: a monthly quota reserved in full a
// second before the month ends and settled after it gives nothing back
// to the new month, and a debt settled there counts in it, on every
// backend; a refund before the end gives the units back.
func TestCalendarSettleAcrossMonthEnd(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	first := time.Date(2028, 3, 1, 0, 0, 0, 0, paris)
	r := &ratelimit.Rule{Name: "cal-month-settle", Limits: []ratelimit.Limit{{Calendar: "month", TZ: "Europe/Paris", Threshold: 10}}}
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		clock := newManualClock()
		l := newLimiter(ratelimit.WithClock(clock))
		clock.Set(first.Add(-time.Second))
		res, err := r.Reserve(ctx, l, 10, "refund")
		require.NoError(t, err)
		clock.Advance(time.Millisecond)
		require.NoError(t, res.Settle(ctx, 3))
		require.NoError(t, r.Check(ctx, l, 7, "refund"), "seven back in February")
		require.Error(t, r.Check(ctx, l, 1, "refund"))

		res, err = r.Reserve(ctx, l, 10, "late")
		require.NoError(t, err)
		clock.Set(first)
		require.NoError(t, res.Settle(ctx, 0))
		require.NoError(t, r.Check(ctx, l, 10, "late"), "March whole: the refund went nowhere")

		clock.Set(first.Add(-time.Second))
		res, err = r.Reserve(ctx, l, 10, "debt")
		require.NoError(t, err)
		clock.Set(first.Add(time.Second))
		require.NoError(t, res.Settle(ctx, 14))
		var le *ratelimit.LimitError
		require.ErrorAs(t, r.Check(ctx, l, 7, "debt"), &le)
		assert.Equal(t, int64(6), le.Remaining, "March holds the debt alone")
		assert.Equal(t, first.AddDate(0, 1, 0).Sub(first.Add(time.Second)), le.RetryAfter, "until April")
	})
}

// TestCalendarSettleOnTheServersClock reserves and settles a monthly and a
// daily quota on the server's clock from clients whose clocks are right or
// 100 days off (the scripts tell their time, and the call is sent again
// with bounds around it): a refund gives the units back, and a debt
// counts.
func TestCalendarSettleOnTheServersClock(t *testing.T) {
	limits := []ratelimit.Limit{
		{Calendar: "month", Threshold: 10},
		{Calendar: "day", TZ: "Asia/Tokyo", Threshold: 10},
	}
	for _, skew := range []time.Duration{0, -100 * 24 * time.Hour, 100 * 24 * time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			ctx := context.Background()
			l := newTestRedis(t)
			skewClientClock(t, skew)
			req := ratelimit.Request{Name: "cal-server-settle", Key: "k", Cost: 10, Limits: limits}
			d, at, err := l.Reserve(ctx, req)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.InDelta(t, time.Now().UnixMicro(), at.UnixMicro(), float64(time.Minute/time.Microsecond), "the server's time")
			require.NoError(t, l.Adjust(ctx, req, at, -4)) // 4 back
			d, err = l.Peek(ctx, ratelimit.Request{Name: req.Name, Key: "k", Limits: limits})
			require.NoError(t, err)
			require.Equal(t, int64(4), d.Remaining, "%+v", d)
			require.NoError(t, l.Adjust(ctx, req, at, 3)) // a debt of 3
			d, err = l.Peek(ctx, ratelimit.Request{Name: req.Name, Key: "k", Limits: limits})
			require.NoError(t, err)
			require.Equal(t, int64(1), d.Remaining, "%+v", d)
		})
	}
}

// linesCalendar: calls with a key per limit, calendar periods among them,
// around a month end and a DST change on a cluster, where the lines of a
// call are decided per key and refunded when another denies: the
// decisions and peeks are the twin's, and so are the states the refunds
// of calendar windows leave.
func (ct *clusterTest) linesCalendar(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	limits := []ratelimit.Limit{
		{Calendar: "month", TZ: "Europe/Paris", Threshold: 6},
		{Calendar: "day", TZ: "Europe/Paris", Threshold: 4, Algorithm: ratelimit.FixedWindow},
		{Period: time.Minute, Threshold: 5, Algorithm: ratelimit.FixedWindow},
	}
	for name, b := range map[string]time.Time{
		"month end": time.Date(2028, 3, 1, 0, 0, 0, 0, paris),
		"fall back": time.Date(2028, 10, 30, 0, 0, 0, 0, paris),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(len(name)), 13))
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			red, _ := ct.limiter(t, ratelimit.WithClock(clock))
			times := []time.Time{b.Add(-26 * time.Hour), b.Add(-time.Hour), b.Add(-time.Second)}
			for range 150 {
				times = append(times, b.Add(time.Duration(rng.IntN(4000)-2000)*time.Microsecond))
			}
			times = append(times, b.Add(-time.Microsecond), b, b.Add(time.Microsecond), b.Add(time.Hour), b.Add(25*time.Hour))
			admitted, denied := 0, 0
			for i, at := range times {
				clock.Set(at)
				req := ratelimit.Request{Name: "lines-cal", Cost: rng.Int64N(3), Limits: limits, Keys: make([]string, len(limits))}
				for j := range req.Keys {
					if rng.IntN(3) > 0 {
						req.Keys[j] = fmt.Sprint("u", rng.IntN(3))
					}
				}
				dm := allow(t, mem, req)
				require.Equal(t, dm, allow(t, red, req), "call %d at %s: %+v", i, at, req)
				pm, err := ratelimit.Peek(ctx, mem, req)
				require.NoError(t, err)
				pr, err := ratelimit.Peek(ctx, red, req)
				require.NoError(t, err)
				require.Equal(t, pm, pr, "peek, call %d at %s: %+v", i, at, req)
				if dm.Allowed {
					admitted++
				} else {
					denied++
				}
			}
			require.NotZero(t, admitted)
			require.NotZero(t, denied)
		})
	}
}

// TestCalendarSlotOnTheServersClock takes a concurrency slot with a
// monthly quota on the server's clock from a client whose clock is 100
// days off: the script tells its time and takes no slot, and the call is
// sent again with bounds around it.
func TestCalendarSlotOnTheServersClock(t *testing.T) {
	ctx := context.Background()
	l := newTestRedis(t)
	skewClientClock(t, 100*24*time.Hour)
	req := ratelimit.Request{Name: "cal-slot", Key: "k", Limits: []ratelimit.Limit{{Calendar: "month", Threshold: 10}}}
	slot := concurrencyLimit(1, time.Minute)
	d, _, err := l.ReserveSlot(ctx, req, slot, "a")
	require.NoError(t, err)
	require.True(t, d.Allowed, "%+v", d)
	d, _, err = l.ReserveSlot(ctx, req, slot, "b")
	require.NoError(t, err)
	require.False(t, d.Allowed, "the one slot is a's")
	require.NoError(t, l.ReleaseSlot(ctx, req, slot, "a"))
	d, _, err = l.ReserveSlot(ctx, req, slot, "b")
	require.NoError(t, err)
	require.True(t, d.Allowed, "%+v", d)
	require.Equal(t, int64(8), d.Remaining, "two calls of the month's 10")
}
