package limitstate

import (
	"testing"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decideAt decides a call of one unit against s at now, which must admit
// it.
func decideAt(t *testing.T, s *State, p *Plan, now int64) {
	t.Helper()
	var d Decision
	ok, _ := s.Decide(p, now, 1, &d)
	require.True(t, ok)
}

func TestLogGrowsWithCallsNotThreshold(t *testing.T) {
	p := NewPlan(limitfacts.Limit{Period: time.Hour, Threshold: 1_000_000_000}, false, 0)
	var s State
	now := time.Now().UnixMicro()
	for range 10 {
		decideAt(t, &s, &p, now)
	}
	assert.LessOrEqual(t, cap(s.runs), 4, "ten calls in one microsecond are one run")
}

func TestLogShrinksAfterABurst(t *testing.T) {
	p := NewPlan(limitfacts.Limit{Period: time.Second, Threshold: 10_000}, false, 0)
	var s State
	now := time.Now().UnixMicro()
	for range 5000 {
		now++
		decideAt(t, &s, &p, now)
	}
	require.GreaterOrEqual(t, cap(s.runs), 5000)
	for range 10 {
		now += time.Second.Microseconds()
		decideAt(t, &s, &p, now)
	}
	assert.LessOrEqual(t, cap(s.runs), 64)
}
