package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNearLimitIsTenPercent(t *testing.T) {
	req := &Request{Name: "n", Limits: []Limit{{Period: time.Second, Threshold: 15}, {Period: time.Second, Threshold: 100}}}
	for _, c := range []struct {
		limit     int
		remaining int64
		near      bool
	}{{0, 2, false}, {0, 1, true}, {0, 0, true}, {1, 11, false}, {1, 10, true}} {
		assert.Equal(t, c.near, nearLimit(req, Decision{Allowed: true, LimitIndex: c.limit, Remaining: c.remaining}), "%+v", c)
	}
}
