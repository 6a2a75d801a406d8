package redislimit

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestSlidingLogCountsCarriesOutOfOrder: admissions carried back at past
// times, in any order between processes (each process's own in order),
// interleaved with calls Redis decides, are each counted until a period
// after the time they were admitted at (or later), never less: Redis's
// count never falls below the units admitted in the last period.
func TestSlidingLogCountsCarriesOutOfOrder(t *testing.T) {
	const period = time.Second
	const threshold = 100
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clock := clocktest.NewManual()
		clock.Set(time.Now().Truncate(time.Hour))
		l := newTestRedis(t, ratelimit.WithClock(clock), WithFallbackProcesses(1))
		req := ratelimit.Request{Name: "order", Key: "k", Cost: 1, Limits: []ratelimit.Limit{{Algorithm: ratelimit.SlidingLog, Period: period, Threshold: threshold}}}
		type admitted struct {
			at    time.Time
			units int64
		}
		var all []admitted
		lower := func(now time.Time) int64 { // the units admitted in the last period
			var n int64
			for _, a := range all {
				if a.at.After(now.Add(-period)) {
					n += a.units
				}
			}
			return n
		}
		for step := range 400 {
			now := clock.Now()
			switch rng.IntN(4) {
			case 0: // a process carries back a run of its admissions, oldest first
				at := now.Add(-time.Duration(rng.Int64N(int64(period * 12 / 10))))
				var as []guard.Admission
				for range 1 + rng.IntN(4) {
					r := req
					r.Cost = 1 + rng.Int64N(40)
					if rng.IntN(8) == 0 {
						r.Cost = 1 + rng.Int64N(2000) // a merged run
					}
					as = append(as, guard.Admission{Req: r, At: at})
					all = append(all, admitted{at, r.Cost})
					at = at.Add(time.Duration(rng.Int64N(int64(period / 20))))
					if at.After(now) {
						at = now
					}
				}
				res := guarded{l.redisBackend}.Carry(t.Context(), as)
				require.Zero(t, res.Dropped)
				require.Empty(t, res.Kept)
			case 1:
				d, err := l.Allow(t.Context(), req)
				require.NoError(t, err)
				if d.Allowed {
					all = append(all, admitted{now, 1})
				}
			default:
				clock.Advance(time.Duration(rng.Int64N(int64(period / 10))))
			}
			d, err := l.Peek(t.Context(), req)
			require.NoError(t, err)
			counted := threshold - d.Remaining
			require.Equal(t, lower(clock.Now()), counted, "seed %d, step %d: Redis counts other units than were admitted in the last period", seed, step)
		}
	}
}
