package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeRule is the README's example: 10 per second per user and 1000 per
// hour for everyone.
func readmeRule() *Rule {
	return &Rule{
		Name:     "svc.Post",
		Limits:   []Limit{{Period: time.Second, Threshold: 10}, {Period: time.Hour, Threshold: 1000}},
		KeyExprs: []string{"user", ""},
	}
}

func TestCheckKeysREADMEExample(t *testing.T) {
	clock := newManualClock()
	l := NewMemory(WithClock(clock))
	r := readmeRule()
	ctx := context.Background()
	admitted := 0
	for u := range 150 {
		user := fmt.Sprint("user", u)
		for c := range 12 {
			err := r.CheckKeys(ctx, l, []string{user, ""}, 1)
			if err == nil {
				admitted++
				continue
			}
			var le *LimitError
			require.ErrorAs(t, err, &le)
			if c >= 10 && admitted < 1000 {
				assert.Equal(t, "user", le.KeyExpr)
				assert.Equal(t, user, le.Key)
				assert.NotContains(t, le.Error(), user)
				assert.Contains(t, le.Error(), "(key=user)")
			} else {
				assert.Equal(t, "", le.KeyExpr, "the global line denies")
				assert.Equal(t, int64(1000), le.Limit.Threshold)
			}
		}
		clock.Advance(time.Second)
	}
	assert.Equal(t, 1000, admitted, "1000 in total, 10 per user and second")
}
