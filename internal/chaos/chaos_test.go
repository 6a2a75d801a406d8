package chaos

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestShortChaos runs the short chaos run on a standalone Redis with three
// faults (a kill and restart on the same port, a SIGSTOP stall, a
// FLUSHALL), its three processes being this test binary started again
// (see TestMain), and asserts counts only, never durations:
//
//   - callers see errors only under onerror=deny, which surfaces them
//     (and do see some there during the outages: a second of calls);
//   - what Redis admits is at most the limit plus what it admitted before
//     the fault ended: a Redis that lost its state (kill, FLUSHALL) starts
//     the window over once, and one that kept it admits no more than the
//     limit;
//   - the fallbacks admit at most the limit once per process (their shares
//     add up to the limit when the heartbeat counted every process; each
//     could take the whole limit if it had counted only itself);
//   - so the window admits at most limit × (1 + processes) decided calls
//     (the documented bound, limit + what Redis admitted that the fallbacks
//     could not know of, is logged in the table, not asserted: it depends
//     on the heartbeat having counted every process, which a loaded machine
//     can delay);
//   - after each outage every limiter decides by Redis again (within a
//     minute, a deadline no healthy run comes near).
func TestShortChaos(t *testing.T) {
	const processes = 3
	results, err := Run(context.Background(), Config{
		Topology: "standalone", Processes: processes, Goroutines: 2, Short: true,
		Faults: []string{"kill+restart", "SIGSTOP", "FLUSHALL"},
		Log:    testWriter{t},
	})
	var table strings.Builder
	Table(&table, results)
	t.Log("\n" + table.String())
	require.NoError(t, err)
	require.Len(t, results, 3*len(DefaultAlgorithms)*len(DefaultPolicies))

	denyErrors := map[string]int64{}
	for _, r := range results {
		name := r.Fault + "/" + string(r.Algorithm) + "/" + string(r.Policy)
		assert.Equal(t, r.Calls, r.Admitted+r.Denied+r.Errors, "%s: every call is counted once", name)
		assert.Positive(t, r.Admitted, "%s: calls are admitted", name)
		assert.True(t, r.Recovered, "%s: every limiter decides by Redis again", name)
		assert.LessOrEqual(t, r.ByRedis, r.Limit+r.RedisBeforeHeal, "%s: Redis admits the limit at most, once more after losing its state", name)
		assert.LessOrEqual(t, r.ByFallback, r.Limit*processes, "%s: the fallbacks admit a share each", name)
		assert.LessOrEqual(t, r.Admitted, r.Generous(), "%s: admitted in the window", name)
		switch r.Policy {
		case ratelimit.FailClosed:
			denyErrors[r.Fault] += r.Errors
			assert.Zero(t, r.ByFallback+r.Undecided, "%s: deny admits only by Redis", name)
		case ratelimit.FailLocal:
			assert.Zero(t, r.Errors, "%s: the fallback decides what Redis cannot (first error: %s)", name, r.FirstError)
			assert.Zero(t, r.Undecided, name)
		case ratelimit.FailOpen:
			assert.Zero(t, r.Errors, "%s: allow lets through what Redis cannot decide (first error: %s)", name, r.FirstError)
			assert.Zero(t, r.ByFallback, name)
		}
	}
	assert.Positive(t, denyErrors["kill+restart"], "callers under deny see the outage")
	assert.Positive(t, denyErrors["SIGSTOP"], "callers under deny see the stall")
}

// testWriter logs each line of the run's progress.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
