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

// TestWindowsOnTheServersClockAgreeWithTheTwin runs the scripts written
// for one window limit on the server's own clock, as in production, where
// they read TIME only when a window starts and learn the rest from their
// key's PTTL (the differential tests pin the clock, which takes the other
// branch). Each call is bracketed by two TIME reads: when both fall in one
// millisecond, everything the script read of the clock fell in it too, and
// its decision must equal the twin's at that millisecond's start (the
// script counts the times it reports from there). A call whose bracket
// spans two milliseconds ends the run of its key, as the twin cannot know
// which one the script saw: both start again on a new key. The calls go on
// until they have gone through many windows, admitting and denying: a slow
// machine compares more calls to get there.
func TestWindowsOnTheServersClockAgreeWithTheTwin(t *testing.T) {
	ctx := context.Background()
	c := rdb(t)
	for _, lim := range []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Period: 3 * time.Millisecond, Threshold: 2},
		{Algorithm: ratelimit.FixedWindow, Period: 20 * time.Millisecond, Threshold: 5},
		{Algorithm: ratelimit.SlidingWindow, Period: 3 * time.Millisecond, Threshold: 2},
		{Algorithm: ratelimit.SlidingWindow, Period: 20 * time.Millisecond, Threshold: 5},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(lim.Period), 5))
			red := newTestRedis(t)
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			run, windows := 0, map[int64]bool{}
			decided := map[bool]int{}
			enough := func(compared int) bool {
				return compared >= 400 && len(windows) > 20 && decided[true] > 80 && decided[false] > 30
			}
			deadline := time.Now().Add(windowSampling)
			for compared := 0; !enough(compared); {
				if time.Now().After(deadline) {
					t.Fatalf("after %s: %d calls compared in %d windows, %d admitted and %d denied; want 400 in more than 20 windows, more than 80 admitted and 30 denied",
						windowSampling, compared, len(windows), decided[true], decided[false])
				}
				req := ratelimit.Request{Name: "server-clock", Key: fmt.Sprint(run), Cost: rng.Int64N(lim.Threshold + 1), Limits: []ratelimit.Limit{lim}}
				before := c.Time(ctx).Val()
				d, err := red.Allow(ctx, req)
				require.NoError(t, err)
				after := c.Time(ctx).Val()
				if before.UnixMilli() != after.UnixMilli() {
					run++
					continue
				}
				clock.Set(time.UnixMilli(before.UnixMilli()))
				require.Equal(t, allow(t, mem, req), d, "call %d of run %d at %s: %+v", compared, run, before.Format(time.StampMicro), req)
				compared++
				decided[d.Allowed]++
				windows[before.UnixMicro()/lim.Period.Microseconds()] = true
				time.Sleep(time.Duration(rng.Int64N(int64(lim.Period/2/us))) * us)
			}
		})
	}
}

// windowSampling bounds how long TestWindowsOnTheServersClockAgreeWithTheTwin
// samples one limit: on an idle machine it needs well under a second.
const windowSampling = 2 * time.Minute
