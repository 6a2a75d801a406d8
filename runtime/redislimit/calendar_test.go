package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/memstate"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// calendarBoundaries are the instants the calendar tests cross: month
// ends, the leap day of 2028, a year's end, and the days of DST changes
// in Paris (last Sundays of March and October) and New York. They lie
// after the test server's clock, as the keys of windows expire at times
// of the pinned clock.
func calendarBoundaries(t *testing.T) map[string]struct {
	at     time.Time
	limits []ratelimit.Limit
} {
	paris, ny := mustZone(t, "Europe/Paris"), mustZone(t, "America/New_York")
	month := func(tz string, n int64) ratelimit.Limit {
		return ratelimit.Limit{Calendar: "month", TZ: tz, Threshold: n}
	}
	day := func(tz string, n int64) ratelimit.Limit {
		return ratelimit.Limit{Calendar: "day", TZ: tz, Threshold: n, Algorithm: ratelimit.FixedWindow}
	}
	return map[string]struct {
		at     time.Time
		limits []ratelimit.Limit
	}{
		"jan31-feb1 Paris":     {time.Date(2028, 2, 1, 0, 0, 0, 0, paris), []ratelimit.Limit{month("Europe/Paris", 6)}},
		"feb29-mar1 UTC":       {time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC), []ratelimit.Limit{month("", 5), day("UTC", 3)}},
		"feb28-leap day NY":    {time.Date(2028, 2, 29, 0, 0, 0, 0, ny), []ratelimit.Limit{day("America/New_York", 4)}},
		"dec31-jan1 NY":        {time.Date(2029, 1, 1, 0, 0, 0, 0, ny), []ratelimit.Limit{{Calendar: "year", TZ: "America/New_York", Threshold: 7}, month("America/New_York", 5)}},
		"week Sunday-Monday":   {time.Date(2028, 3, 27, 0, 0, 0, 0, paris), []ratelimit.Limit{{Calendar: "week", TZ: "Europe/Paris", Threshold: 4}}},
		"Paris spring forward": {time.Date(2028, 3, 27, 0, 0, 0, 0, paris), []ratelimit.Limit{day("Europe/Paris", 3), {Algorithm: ratelimit.FixedWindow, Period: 7 * time.Millisecond, Threshold: 4}}},
		"Paris fall back":      {time.Date(2028, 10, 30, 0, 0, 0, 0, paris), []ratelimit.Limit{day("Europe/Paris", 3)}},
		"NY spring forward":    {time.Date(2028, 3, 13, 0, 0, 0, 0, ny), []ratelimit.Limit{day("America/New_York", 3), month("Europe/Paris", 9)}},
		"NY fall back":         {time.Date(2028, 11, 6, 0, 0, 0, 0, ny), []ratelimit.Limit{day("America/New_York", 2)}},
	}
}

// TestCalendarBackendsAgree feeds the same random calls to the memory
// limiter and to Redis (the script of a single limit's path, the generic
// one, batched calls) on a pinned clock around each calendar boundary:
// from a whole window before it (23 or 25 hours on a DST day), stepping
// in µs to hours, through boundary−1µs and the boundary itself, sometimes
// back, and requires identical decisions.
func TestCalendarBackendsAgree(t *testing.T) {
	for name, b := range calendarBoundaries(t) {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(name)), 7))
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			red := newTestRedis(t, ratelimit.WithClock(clock))
			gen := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("generic:"), withGenericScript(), WithDenyCache(0), withoutHeartbeat())
			cac := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("cached:"), WithDenyCache(4), WithDenyHold(time.Hour), withoutHeartbeat())
			admitted, denied := 0, 0
			// The times: hours before, then close, then exactly at the
			// boundary, then after.
			var times []time.Time
			for _, back := range []time.Duration{26 * time.Hour, 3 * time.Hour, time.Minute, time.Second, 3 * time.Millisecond} {
				times = append(times, b.at.Add(-back))
			}
			for i := 0; i < 60; i++ {
				times = append(times, b.at.Add(time.Duration(rng.IntN(4000)-2000)*time.Microsecond))
			}
			times = append(times, b.at.Add(-time.Microsecond), b.at.Add(-time.Microsecond), b.at, b.at, b.at.Add(time.Microsecond), b.at.Add(time.Hour), b.at.Add(23*time.Hour), b.at.Add(25*time.Hour))
			for i, at := range times {
				clock.Set(at)
				req := ratelimit.Request{Name: "cal", Key: fmt.Sprint("k", rng.IntN(2)), Cost: rng.Int64N(3), Limits: b.limits}
				dm, dr, dg, dc := allow(t, mem, req), allow(t, red, req), allow(t, gen, req), allow(t, cac, req)
				require.Equal(t, dm, dr, "call %d at %s: %+v", i, at, req)
				require.Equal(t, dm, dg, "generic, call %d at %s", i, at)
				requireCacheAgrees(t, dm, dc, -1, "deny cache, call %d at %s", i, at)
				if dm.Allowed {
					admitted++
				} else {
					denied++
				}
			}
			require.NotZero(t, admitted)
			require.NotZero(t, denied)
			// Batched calls, which the batch script decides together.
			clock.Set(b.at.Add(-time.Microsecond))
			var wg sync.WaitGroup
			for k := range 8 {
				wg.Go(func() {
					req := ratelimit.Request{Name: "cal-batch", Key: fmt.Sprint("b", k%2), Limits: b.limits}
					_, err := red.Allow(context.Background(), req)
					assert.NoError(t, err)
				})
			}
			wg.Wait()
			for k := range 2 {
				req := ratelimit.Request{Name: "cal-batch", Key: fmt.Sprint("b", k), Limits: b.limits}
				for range 4 {
					_, err := mem.Allow(context.Background(), req)
					require.NoError(t, err)
				}
				for _, at := range []time.Time{b.at.Add(-time.Microsecond), b.at} {
					clock.Set(at)
					require.Equal(t, allow(t, mem, req), allow(t, red, req), "batched key %d at %s", k, at)
				}
				clock.Set(b.at.Add(-time.Microsecond))
			}
		})
	}
}

// TestMonthlyQuotaResetsAtMidnightOfTheFirst is the acceptance test: a
// monthly quota in Paris is spent at 1µs before midnight of the 1st there,
// told to retry in 1µs, and admits again at midnight, with the whole next
// month ahead, on every backend.
func TestMonthlyQuotaResetsAtMidnightOfTheFirst(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		lim := newLimiter(ratelimit.WithClock(clock))
		for _, first := range []time.Time{
			time.Date(2028, 2, 1, 0, 0, 0, 0, paris),
			time.Date(2028, 3, 1, 0, 0, 0, 0, paris),
			time.Date(2028, 4, 1, 0, 0, 0, 0, paris), // the first month of summer time
			time.Date(2029, 1, 1, 0, 0, 0, 0, paris),
		} {
			req := ratelimit.Request{Name: "monthly", Key: first.String(), Limits: []ratelimit.Limit{{Calendar: "month", TZ: "Europe/Paris", Threshold: 3}}}
			clock.Set(first.AddDate(0, 0, -3))
			for range 3 {
				require.True(t, allow(t, lim, req).Allowed)
			}
			clock.Set(first.Add(-time.Microsecond))
			d := allow(t, lim, req)
			require.False(t, d.Allowed, "%s", first)
			assert.Equal(t, time.Microsecond, d.RetryAfter)
			assert.Equal(t, time.Microsecond, d.ResetAfter)
			clock.Set(first)
			d = allow(t, lim, req)
			require.True(t, d.Allowed, "%s", first)
			assert.Equal(t, int64(2), d.Remaining)
			assert.Equal(t, first.AddDate(0, 1, 0).Sub(first), d.ResetAfter, "%s", first)
		}
	})
}

// TestCalendarOnTheServersClock decides a daily and a monthly quota on the
// server's clock, from clients whose clocks are right, in the month before
// or after (the month's bounds sent still hold the server's time: the
// script picks the window; the day's do not) and ahead by 100 days (the
// script tells its time and the call is sent again around it), alone,
// batched and peeked: each
// tells the time to the next midnight in Tokyo of the server's clock.
func TestCalendarOnTheServersClock(t *testing.T) {
	tokyo := mustZone(t, "Asia/Tokyo")
	limits := []ratelimit.Limit{
		{Calendar: "day", TZ: "Asia/Tokyo", Threshold: 1000},
		{Calendar: "month", Threshold: 1000},
	}
	// Clocks in the month before and after the server's: the month's
	// bounds hold the server's time in their next and their previous window.
	now := time.Now().UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	behind, ahead := -now.Sub(monthStart)-5*24*time.Hour, monthStart.AddDate(0, 1, 0).Sub(now)+5*24*time.Hour
	for _, skew := range []time.Duration{0, behind, ahead, 100 * 24 * time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			l := newTestRedis(t)
			skewClientClock(t, skew)
			check := func(d ratelimit.Decision, before, after time.Time) {
				t.Helper()
				// The day's limit: the first, which a tie picks.
				y, m, dd := after.In(tokyo).Date()
				end := time.Date(y, m, dd+1, 0, 0, 0, 0, tokyo)
				assert.LessOrEqual(t, d.ResetAfter, end.Sub(before)+time.Millisecond)
				assert.GreaterOrEqual(t, d.ResetAfter, end.Sub(after)-time.Millisecond)
			}
			ctx := context.Background()
			req := ratelimit.Request{Name: "server-clock", Key: "k", Limits: limits}
			before := time.Now()
			d, err := l.Allow(ctx, req)
			after := time.Now()
			require.NoError(t, err)
			require.True(t, d.Allowed)
			check(d, before, after)
			one := ratelimit.Request{Name: "server-clock-one", Key: "k", Limits: limits[:1]}
			before = time.Now()
			d, err = l.Allow(ctx, one)
			after = time.Now()
			require.NoError(t, err)
			assert.Equal(t, int64(999), d.Remaining)
			check(d, before, after)
			before = time.Now()
			d, err = l.Peek(ctx, one)
			after = time.Now()
			require.NoError(t, err)
			assert.Equal(t, int64(999), d.Remaining, "peeked: before the call")
			check(d, before, after)
			// The month alone, whose bounds hold the server's time.
			before = time.Now()
			d, err = l.Allow(ctx, ratelimit.Request{Name: "server-clock-month", Limits: limits[1:]})
			after = time.Now()
			require.NoError(t, err)
			y, m, _ := after.UTC().Date()
			monthEnd := time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
			assert.LessOrEqual(t, d.ResetAfter, monthEnd.Sub(before)+time.Millisecond)
			assert.GreaterOrEqual(t, d.ResetAfter, monthEnd.Sub(after)-time.Millisecond)
			var wg sync.WaitGroup
			before = time.Now()
			for range 16 {
				wg.Go(func() {
					d, err := l.Allow(ctx, one)
					assert.NoError(t, err)
					assert.True(t, d.Allowed)
				})
			}
			wg.Wait()
			d, err = l.Peek(ctx, one)
			require.NoError(t, err)
			assert.Equal(t, int64(1000-17), d.Remaining)
			check(d, before, time.Now())
		})
	}
}

// TestCalendarSkewReply: a script sent bounds that miss its time charges
// nothing and replies the time.
func TestCalendarSkewReply(t *testing.T) {
	l := newTestRedis(t)
	req := ratelimit.Request{Name: "skew", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 5, Algorithm: ratelimit.FixedWindow}, {Calendar: "day", Threshold: 5}}}
	far := time.Now().Add(-72 * time.Hour).UnixMicro()
	keys, args := l.appendCallAt(nil, nil, &req, "", far)
	before := time.Now().UnixMicro()
	_, err := decideScript.Run(context.Background(), rdb(t), keys, args...).Result()
	at, skewed := calendarSkew(err)
	require.True(t, skewed, "%v", err)
	assert.GreaterOrEqual(t, at, before-1000)
	assert.LessOrEqual(t, at, time.Now().UnixMicro()+1000)
	n, err := rdb(t).Exists(context.Background(), keys...).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing charged, the first limit rolled back")
}

// TestCalendarResetAndOverride: Reset forgets a calendar window, and an
// override in the Redis hash sets a calendar period.
func TestCalendarResetAndOverride(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	l := newTestRedis(t, ratelimit.WithClock(clock))
	clock.Set(time.Date(2028, 5, 20, 12, 0, 0, 0, time.UTC))
	req := ratelimit.Request{Name: "reset", Key: "k", Limits: []ratelimit.Limit{{Calendar: "week", Threshold: 1}}}
	require.True(t, allow(t, l, req).Allowed)
	require.False(t, allow(t, l, req).Allowed)
	require.NoError(t, l.Reset(ctx, "reset", "k"))
	require.True(t, allow(t, l, req).Allowed)

	ov, err := ratelimit.ParseOverrides(map[string]string{"svc.Get": "period=month tz=Europe/Paris threshold=2"})
	require.NoError(t, err)
	got, ok := ov.Lookup(ctx, "svc.Get")
	require.True(t, ok)
	assert.Equal(t, []ratelimit.Limit{{Calendar: "month", TZ: "Europe/Paris", Threshold: 2}}, got)
}

// TestCalendarCarryBack: what the fallback admitted in the calendar window
// still running is charged to Redis when it answers again, in that
// window; what it admitted in the month before is not.
func TestCalendarCarryBack(t *testing.T) {
	ctx := context.Background()
	paris := mustZone(t, "Europe/Paris")
	clock := newManualClock()
	l := newTestRedis(t, ratelimit.WithClock(clock))
	req := ratelimit.Request{Name: "carry", Key: "k", Cost: 2, Limits: []ratelimit.Limit{
		{Calendar: "month", TZ: "Europe/Paris", Threshold: 10},
		{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 100},
	}}
	first := time.Date(2028, 3, 1, 0, 0, 0, 0, paris)
	l.fallback.Remember(req, first.Add(-time.Minute)) // February's: dropped
	l.fallback.Remember(req, first.Add(time.Minute))
	l.fallback.Remember(req, first.Add(2*time.Minute))
	clock.Set(first.Add(90 * time.Minute)) // the hour's window of the charges has closed
	l.fallback.CarryBack(ctx)
	assert.Zero(t, l.fallback.Held())
	d, err := l.Peek(ctx, ratelimit.Request{Name: "carry", Key: "k", Limits: req.Limits})
	require.NoError(t, err)
	assert.Equal(t, int64(10-4), d.Remaining, "two charges of 2 in March")
	assert.Equal(t, first.AddDate(0, 1, 0).Sub(clock.Now()), d.ResetAfter)
}

// TestCalendarKeysExpireWithTheirWindow: the Redis key of a monthly quota
// expires a second (keepMs) after midnight of the 1st, and the twin's
// state stops mattering then, whatever the time of the call.
func TestCalendarKeysExpireWithTheirWindow(t *testing.T) {
	ctx := context.Background()
	paris := mustZone(t, "Europe/Paris")
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	red := newTestRedis(t, ratelimit.WithClock(clock))
	lim := ratelimit.Limit{Calendar: "month", TZ: "Europe/Paris", Threshold: 5}
	req := ratelimit.Request{Name: "expiry", Key: "k", Limits: []ratelimit.Limit{lim}}
	end := time.Date(2028, 11, 1, 0, 0, 0, 0, paris) // after October's 25-hour day
	clock.Set(time.Date(2028, 10, 12, 8, 30, 0, 0, paris))
	require.Equal(t, allow(t, mem, req), allow(t, red, req))
	s, ok := memstate.Lookup(mem, "expiry", "k")
	require.True(t, ok)
	assert.Equal(t, end.UnixMicro(), s.Expiry)
	at, err := rdb(t).PExpireTime(ctx, red.Key("expiry", "k", 0, ratelimit.FixedWindow)).Result()
	require.NoError(t, err)
	assert.Equal(t, end.Add(time.Second).UnixMilli(), at.Milliseconds())
}

// TestCalendarManyGoroutines: goroutines calling at once, a µs before a
// month's end and at its end, get exactly the threshold admitted in each
// window, on every backend.
func TestCalendarManyGoroutines(t *testing.T) {
	first := time.Date(2028, 7, 1, 0, 0, 0, 0, mustZone(t, "America/New_York"))
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		lim := newLimiter(ratelimit.WithClock(clock))
		req := ratelimit.Request{Name: "crowd", Key: "k", Limits: []ratelimit.Limit{
			{Calendar: "month", TZ: "America/New_York", Threshold: 100},
			{Calendar: "week", Threshold: 1000},
		}}
		for _, at := range []time.Time{first.Add(-time.Microsecond), first} {
			clock.Set(at)
			var wg sync.WaitGroup
			var mu sync.Mutex
			admitted := 0
			for range 16 {
				wg.Go(func() {
					for range 10 {
						d, err := lim.Allow(context.Background(), req)
						if !assert.NoError(t, err) {
							return
						}
						if d.Allowed {
							mu.Lock()
							admitted++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			assert.Equal(t, 100, admitted, "at %s", at)
		}
	})
}

// TestCalendarBoundsCache: the bounds shared by a window's calls are those
// computed for each call, in any order of times.
func TestCalendarBoundsCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2028, 3, 26, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, lim := range []ratelimit.Limit{{Calendar: "day", TZ: "Europe/Paris"}, {Calendar: "week"}, {Calendar: "month", TZ: "America/New_York"}} {
		c, ok := calendarOf(lim)
		require.True(t, ok)
		for range 2000 {
			at := base + rng.Int64N(int64(40*24*time.Hour/time.Microsecond))
			got, ok := calendarBounds(lim, at)
			require.True(t, ok)
			require.Equal(t, c.Bounds(at), got, "%s at %d", lim.Calendar, at)
		}
	}
	_, ok := calendarBounds(ratelimit.Limit{Period: time.Second}, base)
	assert.False(t, ok)
}
