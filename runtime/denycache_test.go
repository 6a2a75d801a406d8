package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireCacheAgrees requires d, a decision of a Redis limiter with a deny
// cache, to be want, the twin's decision of the same call; or, when the
// cache made d, a denial the twin makes too, told to retry after at most
// slack more than the twin says (a repeated denial tells what is left of
// the RetryAfter Redis told, which for a costlier call is short of its
// own).
func requireCacheAgrees(t *testing.T, want, d Decision, slack time.Duration, msgAndArgs ...any) {
	t.Helper()
	if d.Source != SourceCache {
		require.Equal(t, want, d, msgAndArgs...)
		return
	}
	require.False(t, want.Allowed, msgAndArgs...)
	require.False(t, d.Allowed, msgAndArgs...)
	require.Positive(t, d.RetryAfter, msgAndArgs...)
	require.LessOrEqual(t, d.RetryAfter, want.RetryAfter+slack, msgAndArgs...)
}
