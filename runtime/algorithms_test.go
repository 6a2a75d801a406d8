package ratelimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
