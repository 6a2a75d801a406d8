package httplimit

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestCalendarHeaders: a denial of a calendar limit is retried at the next
// window (Retry-After, RateLimit) and its policy's window is the calendar
// window running now.
func TestCalendarHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	lim := ratelimit.Limit{Calendar: "day", Threshold: 5}
	require.True(t, WriteError(w, &ratelimit.LimitError{Name: "n", Limit: lim, RetryAfter: 90 * time.Minute, ResetAfter: 90 * time.Minute}))
	assert.Equal(t, "5400", w.Header().Get("Retry-After"))
	assert.Equal(t, `"n";q=5;w=86400`, w.Header().Get("RateLimit-Policy"))
	assert.Equal(t, `"n";r=0;t=5400`, w.Header().Get("RateLimit"))

	out := adminLimits([]ratelimit.Limit{{Calendar: "month", TZ: "Europe/Paris", Threshold: 9}})
	assert.Equal(t, adminLimit{Text: "9/month Europe/Paris (fixed_window)", Period: "month", TZ: "Europe/Paris", Threshold: 9, Algorithm: ratelimit.FixedWindow}, out[0])
}
