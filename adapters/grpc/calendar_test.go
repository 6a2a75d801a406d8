package ratelimitgrpc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	ratelimitgrpc "github.com/ratelimitgen/ratelimitgen/adapters/grpc"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestCalendarStatus: a denial of a calendar quota names its period and
// zone, as Limit.String does.
func TestCalendarStatus(t *testing.T) {
	st, ok := ratelimitgrpc.Status(&ratelimit.LimitError{Name: "reports", RetryAfter: time.Hour,
		Limit: ratelimit.Limit{Calendar: "month", TZ: "Europe/Paris", Threshold: 10000}})
	require.True(t, ok)
	assert.Equal(t, codes.ResourceExhausted, st.Code())
	assert.Equal(t, "ratelimit: reports exceeded 10000 per month Europe/Paris; retry after 1h0m0s", st.Message())
	st, _ = ratelimitgrpc.Status(&ratelimit.LimitError{Name: "daily", RetryAfter: time.Second, Limit: ratelimit.Limit{Calendar: "day", Threshold: 3}})
	assert.Equal(t, "ratelimit: daily exceeded 3 per day; retry after 1s", st.Message())
}
