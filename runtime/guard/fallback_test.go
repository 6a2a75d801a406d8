package guard_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

func TestLimitShare(t *testing.T) {
	for _, c := range []struct {
		l    ratelimit.Limit
		n    int
		want ratelimit.Limit
	}{
		{ratelimit.Limit{Period: time.Second, Threshold: 10}, 1, ratelimit.Limit{Period: time.Second, Threshold: 10}},
		{ratelimit.Limit{Period: time.Second, Threshold: 10}, 3, ratelimit.Limit{Period: time.Second, Threshold: 3}},
		{ratelimit.Limit{Period: time.Second, Threshold: 10}, 10, ratelimit.Limit{Period: time.Second, Threshold: 1}},
		{ratelimit.Limit{Period: time.Second, Threshold: 2}, 3, ratelimit.Limit{Period: time.Second, Threshold: 1}},
		{ratelimit.Limit{Period: time.Second, Threshold: 10, Algorithm: ratelimit.TokenBucket, Burst: 25}, 4, ratelimit.Limit{Period: time.Second, Threshold: 2, Algorithm: ratelimit.TokenBucket, Burst: 6}},
		{ratelimit.Limit{Period: time.Second, Threshold: 10, Algorithm: ratelimit.GCRA}, 4, ratelimit.Limit{Period: time.Second, Threshold: 2, Algorithm: ratelimit.GCRA}},
		{ratelimit.Limit{Period: time.Second, Threshold: 9, Algorithm: ratelimit.LeakyBucket, Capacity: 2}, 4, ratelimit.Limit{Period: time.Second, Threshold: 2, Algorithm: ratelimit.LeakyBucket, Capacity: 1}},
	} {
		got := guard.Share(c.l, c.n)
		assert.Equal(t, c.want, got, "%+v / %d", c.l, c.n)
		assert.NoError(t, got.Validate())
	}
}
