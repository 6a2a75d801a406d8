package ratelimit

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryAlgorithmHasItsOwnCounter checks that counterOf gives each
// algorithm a counter of its own, so that a new algorithm is not decided
// as another (counterOf's default is the sliding log's).
func TestEveryAlgorithmHasItsOwnCounter(t *testing.T) {
	seen := map[counter]Algorithm{}
	for _, alg := range Algorithms() {
		c := counterOf(alg)
		assert.NotZero(t, c, alg)
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share counter %d", alg, other, c)
		}
		seen[c] = alg
	}
}

// TestDecideIsCheckThenCharge: for every algorithm, a limit's decide (which
// a bucket does in one pass) leaves the decision and the state that check,
// then charge of an admitted call, leave, at random costs and times that
// keep the limit full.
func TestDecideIsCheckThenCharge(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, alg := range Algorithms() {
		if isConcurrency(Limit{Algorithm: alg}) {
			continue // a slot, not a limitState
		}
		p := memoryPlanOf(Limit{Algorithm: alg, Period: time.Second, Threshold: 7})
		var fused, apart limitState
		now, denied := int64(1_700_000_000_000_000), 0
		for i := range 2000 {
			cost := rng.Int64N(4)
			var d1, d2 Decision
			ok1, exp1 := fused.decide(&p, now, cost, &d1)
			ok2, exp2 := apart.check(&p, now, cost, &d2), int64(0)
			if ok2 {
				exp2 = apart.charge(&p, now, cost)
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
