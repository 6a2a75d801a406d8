package parser

import (
	"testing"

	"github.com/stretchr/testify/assert"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestMaxSlidingWindowThreshold checks that the parser rejects exactly the
// sliding_window thresholds the runtime rejects.
func TestMaxSlidingWindowThreshold(t *testing.T) {
	assert.Equal(t, int64(ratelimit.MaxSlidingWindowThreshold), int64(maxSlidingWindowThreshold))
}
