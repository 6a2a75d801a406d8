package redistest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestShardOfPutsEveryTestInOneShard: the tests to run alone have shards
// of their own while there are shards enough, and every test has one
// shard, in range.
func TestShardOfPutsEveryTestInOneShard(t *testing.T) {
	alone := []string{"TestA", "TestB"}
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("TestN%d", i))
	}
	for n := 1; n <= 6; n++ {
		for _, name := range append(names, alone...) {
			k := shardOf(name, alone, n)
			require.True(t, k >= 0 && k < n, "%s in shard %d of %d", name, k, n)
			if n > len(alone) {
				for i, a := range alone {
					if name == a {
						require.Equal(t, i, k, "%s runs alone", name)
					} else {
						require.NotEqual(t, i, k, "%s is in the shard of %s", name, a)
					}
				}
			}
		}
	}
}
