package guard_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestFallbackSpendsOnlyItsShareOfWhatTheBackendSaidWasLeft: a fallback
// that starts deciding mid-window admits its share of what the backend
// last told was left of the line (remaining / processes), not its share of
// the whole limit; once the answer no longer holds (the window it told of
// ended), its share of the whole limit again. Every algorithm, a line of a
// rule with a key per limit (its second limit) among them.
func TestFallbackSpendsOnlyItsShareOfWhatTheBackendSaidWasLeft(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog, ratelimit.SlidingWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			limit := ratelimit.Limit{Algorithm: alg, Period: time.Minute, Threshold: 100}
			other := ratelimit.Limit{Period: time.Minute, Threshold: 1000}
			// 1 process: the share is the limit; 4: a quarter of it.
			for _, n := range []int{1, 4} {
				rules := []*ratelimit.Rule{
					{Name: "one", Limits: []ratelimit.Limit{limit}, OnError: ratelimit.FailLocal},
					{Name: "two", Limits: []ratelimit.Limit{other, limit}, KeyExprs: []string{"a", "b"}, OnError: ratelimit.FailLocal},
				}
				for _, rule := range rules {
					admitted, again := fallbackAfter(t, rule, n, 90)
					share := 100 / n
					assert.Equal(t, (100-90)/n, admitted, "%s of %d processes: the fallback's share of the 10 left", rule.Name, n)
					assert.Equal(t, share, again, "%s of %d processes: the whole share once the answer ended", rule.Name, n)
				}
			}
		})
	}
}

// fallbackAfter has the backend admit used calls of rule's line, then the
// backend fail; it returns how many calls the fallback of one of n
// processes admits then, and after the period (the backend's answer no
// longer holding).
func fallbackAfter(t *testing.T, rule *ratelimit.Rule, n, used int) (admitted, again int) {
	ctx := context.Background()
	clock := clocktest.NewManual()
	backend := &flaky{MemoryLimiter: ratelimit.NewMemory(ratelimit.WithClock(clock))}
	l := guard.Wrap(backend, guard.WithBreaker(1, time.Hour, time.Hour), guard.WithFallbackProcesses(n))
	defer guard.Close(l)
	keys := []string{"k"}
	if len(rule.Limits) > 1 {
		keys = []string{"a", "b"}
	}
	for i := range used {
		require.NoError(t, rule.Check(ctx, l, 1, keys...), "call %d the backend admits", i)
	}
	backend.down.Store(true)
	count := func() (k int) {
		for range 200 {
			if rule.Check(ctx, l, 1, keys...) == nil {
				k++
			}
		}
		return k
	}
	admitted = count()
	clock.Advance(2 * time.Minute)
	return admitted, count()
}
