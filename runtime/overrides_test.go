package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func perMinute(n int64) Limit { return Limit{Period: time.Minute, Threshold: n} }

func TestStaticOverrides(t *testing.T) {
	ctx := context.Background()
	var s StaticOverrides
	_, ok := s.Lookup(ctx, "r")
	assert.False(t, ok, "the zero value overrides nothing")
	s.SetRule("r", perMinute(1))
	s.SetKey("r", "k", perMinute(2))
	s.SetTier("r", "gold", perMinute(3))
	s.SetKeyTier("r", "g", "gold")
	lookup := func(key string) int64 {
		l, ok := s.LookupKey(ctx, "r", key)
		if !ok {
			return 0
		}
		return l[0].Threshold
	}
	// A key without limits of its own or of its tier gets the rule's.
	assert.Equal(t, []int64{2, 3, 1}, []int64{lookup("k"), lookup("g"), lookup("x")})
	s.SetKeyTier("r", "k", "gold") // instead of its own
	s.SetKey("r", "g", perMinute(4))
	assert.Equal(t, []int64{3, 4}, []int64{lookup("k"), lookup("g")})
	s.SetTier("r", "gold") // k keeps its membership, without limits
	assert.Equal(t, int64(1), lookup("k"))
	s.SetTier("r", "gold", perMinute(5))
	assert.Equal(t, int64(5), lookup("k"))
	s.SetKey("r", "g")
	s.SetKeyTier("r", "k", "")
	s.SetTier("r", "gold")
	assert.Equal(t, []int64{1, 1}, []int64{lookup("k"), lookup("g")})
	got, ok := s.Lookup(ctx, "r")
	assert.True(t, ok && got[0].Threshold == 1)
	s.SetRule("r")
	_, ok = s.Lookup(ctx, "r")
	assert.False(t, ok)
	assert.Empty(t, s.table.Load().rules, "a rule without overrides leaves the table")
}
