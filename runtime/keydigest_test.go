package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestKeyDigest: the digest is what sha256sum prints, and a limiter keeps
// it whole, so a denial names the digest, never the secret.
func TestKeyDigest(t *testing.T) {
	// printf %s 'sk_live_123' | sha256sum
	const secret = "sk_live_123"
	digest := ratelimit.KeyDigest(secret)
	assert.Equal(t, "46e8faffd30e95eaace676b683d578c61097ebc9e4f1ec3b69370665597f9fd0", digest)
	assert.Len(t, digest, 64)
	assert.Equal(t, ratelimit.KeyDigest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")

	rule := &ratelimit.Rule{Name: "api.get", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}}
	limiter := ratelimit.NewMemory()
	require.NoError(t, rule.Check(context.Background(), limiter, 1, digest))
	var le *ratelimit.LimitError
	require.True(t, errors.As(rule.Check(context.Background(), limiter, 1, digest), &le))
	assert.Equal(t, digest, le.Key)
	assert.NotContains(t, le.Error(), secret)
}
