package limitstate

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryAlgorithmHasItsOwnState checks that each algorithm's plan
// carries an ID of its own, so that a state is not read as another
// algorithm's, and that a plan of no known algorithm is the default's.
func TestEveryAlgorithmHasItsOwnState(t *testing.T) {
	seen := map[uint8]string{}
	for _, a := range limitfacts.Algorithms() {
		p := NewPlan(limitfacts.Limit{Algorithm: a.Name, Period: time.Second, Threshold: 7}, false, 0)
		assert.NotZero(t, p.id, a.Name)
		assert.Equal(t, a.State, p.shape, a.Name)
		if other, ok := seen[p.id]; ok {
			t.Errorf("%s and %s share ID %d", a.Name, other, p.id)
		}
		seen[p.id] = a.Name
	}
	unknown := NewPlan(limitfacts.Limit{Algorithm: "nope", Period: time.Second, Threshold: 7}, false, 0)
	def := NewPlan(limitfacts.Limit{Period: time.Second, Threshold: 7}, false, 0)
	assert.Equal(t, def, unknown)
}

// TestDecideIsCheckThenCharge: for every algorithm, a limit's Decide
// (which a bucket does in one pass) leaves the decision and the state that
// Check, then Charge of an admitted call, leave, at random costs and times
// that keep the limit full.
func TestDecideIsCheckThenCharge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, alg := range limitfacts.Names(nil) {
		p := NewPlan(limitfacts.Limit{Algorithm: alg, Period: time.Second, Threshold: 7}, false, 0)
		var fused, apart State
		now, denied := int64(1_700_000_000_000_000), 0
		for i := range 2000 {
			cost := rng.Int64N(4)
			var d1, d2 Decision
			ok1, exp1 := fused.Decide(&p, now, cost, &d1)
			ok2, exp2 := apart.Check(&p, now, cost, &d2), int64(0)
			if ok2 {
				exp2 = apart.Charge(&p, now, cost)
			}
			require.Equal(t, ok2, ok1, "%s: call %d", alg, i)
			require.Equal(t, exp2, exp1, "%s: call %d", alg, i)
			require.Equal(t, d2, d1, "%s: call %d", alg, i)
			require.Equal(t, apart, fused, "%s: call %d", alg, i)
			if !ok1 {
				denied++
			}
			now += rng.Int64N(60_000) // µs: the limit refills slower than the calls come
		}
		assert.Greater(t, denied, 200, "%s: the calls cross the limit", alg)
	}
}
