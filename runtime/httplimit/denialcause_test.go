package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestEveryDenialSaysItsCause is issue 35's finding that a call denied
// by an upstream's cooldown read "exceeded 300 per 1m0s" while 1 of 300
// was used, a blocked key's 429 said only "retry after 60 s", and a
// denial by a shared line named the method, not the line. Each denial's
// LimitError now has a Cause callers can switch on, the shared Line that
// denied it, and a message that says so, and the 429's body carries
// them, on memory and on Redis.
func TestEveryDenialSaysItsCause(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		blocked := &ratelimit.StaticOverrides{}
		blocked.SetKey("svc.Blocked", "evil", ratelimit.Limit{Algorithm: ratelimit.Block})
		l := newLimiter(ratelimit.WithOverrides(blocked))
		own := &ratelimit.Rule{Name: "svc.Own", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}}
		shared := &ratelimit.Rule{Name: "svc.Search", KeyExprs: []string{"user", ""}, Shared: []string{"", "svc#global"},
			Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 100}, {Period: time.Minute, Threshold: 1}}}
		cool := &ratelimit.Rule{Name: "svc.Cool", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 300, Cooldown: true}}}
		block := &ratelimit.Rule{Name: "svc.Blocked", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 60}}}
		require.NoError(t, own.Check(ctx, l, 1, "k"))
		require.NoError(t, shared.Check(ctx, l, 1, "alice", ""))
		require.NoError(t, cool.Check(ctx, l, 1, "k"))
		require.NoError(t, cool.Cooldown(ctx, l, 0, "k", 30*time.Second))
		for _, tc := range []struct {
			rule              *ratelimit.Rule
			keys              []string
			cause, line, says string
		}{
			{own, []string{"k"}, "limit", "", "exceeded 1 per 1m0s"},
			{shared, []string{"bob", ""}, "limit", "svc#global", "shared line svc#global exceeded 1 per 1m0s"},
			{cool, []string{"k"}, "cooldown", "", "is cooling down: an upstream asked for a pause"},
			{block, []string{"evil"}, "blocked", "", "is blocked by an override"},
		} {
			err := tc.rule.Check(ctx, l, 1, tc.keys...)
			var le *ratelimit.LimitError
			require.True(t, errors.As(err, &le), "%s: %v", tc.rule.Name, err)
			assert.Equal(t, tc.cause, le.Cause(), tc.rule.Name)
			assert.Equal(t, tc.line, le.Line, tc.rule.Name)
			assert.Contains(t, le.Error(), tc.says, tc.rule.Name)
			w := httptest.NewRecorder()
			require.True(t, WriteErrorAs(w, err, JSON))
			var body ErrorBody
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
			assert.Equal(t, tc.cause, body.Cause, tc.rule.Name)
			assert.Equal(t, tc.line, body.Line, tc.rule.Name)
			if tc.cause != "limit" || tc.line != "" {
				assert.NotEqual(t, "Too Many Requests: retry after "+w.Header().Get("Retry-After")+" s", body.Message, "%s: the message says why", tc.rule.Name)
			}
		}
	})
}
