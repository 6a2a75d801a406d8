package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// TestAdminExplainsWhereLimitsComeFrom: a key's view says whether its
// limits are its own, its tier's, the rule's override or the directive's,
// and peeks at them as a call would be decided (a key overridden to 6
// has 6 less what it used); an untouched key peeks ResetAfter 0.
func TestAdminExplainsWhereLimitsComeFrom(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		var ov ratelimit.StaticOverrides
		ov.SetKey("why", "own", ratelimit.Limit{Period: time.Minute, Threshold: 6})
		ov.SetTier("why", "gold", ratelimit.Limit{Period: time.Minute, Threshold: 9})
		ov.SetKeyTier("why", "g", "gold")
		ov.SetKey("why", "vip", ratelimit.Limit{Algorithm: ratelimit.Unlimited})
		l := newLimiter(ratelimit.WithOverrides(&ov))
		rule := &ratelimit.Rule{Name: "why", Limits: perPeriod(2, time.Minute)}
		other := &ratelimit.Rule{Name: "plain", Limits: perPeriod(2, time.Minute)}
		h := AdminHandler(l, []*ratelimit.Rule{rule, other})
		require.NoError(t, rule.Check(ctx, l, 1, "own"))
		for key, want := range map[string]struct {
			from      string
			remaining float64
			reset     string
		}{"own": {"key", 5, "1m0s"}, "g": {"tier:gold", 9, "0s"}, "other": {"directive", 2, "0s"}, "vip": {"key", 0, "0s"}} {
			code, body := adminDo(t, h, "GET", "key", url.Values{"name": {"why"}, "key": {key}})
			require.Equal(t, http.StatusOK, code, key)
			assert.Equal(t, want.from, body["from"], key)
			d := body["decision"].(map[string]any)
			assert.Equal(t, want.remaining, d["remaining"], key)
			assert.Equal(t, want.reset, d["reset_after"], key)
		}
		ov.SetRule("plain", ratelimit.Limit{Period: time.Minute, Threshold: 5})
		_, body := adminDo(t, h, "GET", "key", url.Values{"name": {"plain"}, "key": {"x"}})
		assert.Equal(t, "rule", body["from"])
		d, err := other.Peek(ctx, l, "x")
		require.NoError(t, err)
		assert.Equal(t, int64(5), d.Remaining, "Rule.Peek applies the rule's override")
	})
}

// TestAdminTakesStandInsAsErrorsShowThem: a long key, named by the
// stand-in its LimitError shows, is peeked and reset as itself.
func TestAdminTakesStandInsAsErrorsShowThem(t *testing.T) {
	ctx := context.Background()
	long := "Bearer " + strings.Repeat("eyJzdWIiOiIxMjM0NTY3ODkwIn0", 1000)
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		l := newLimiter()
		rule := &ratelimit.Rule{Name: "long", Limits: perPeriod(1, time.Hour)}
		h := AdminHandler(l, []*ratelimit.Rule{rule}, WithAdminReset())
		require.NoError(t, rule.Check(ctx, l, 1, long))
		var le *ratelimit.LimitError
		require.ErrorAs(t, rule.Check(ctx, l, 1, long), &le)
		require.Equal(t, callkey.Bound(long), le.Key)

		q := url.Values{"name": {"long"}, "key": {le.Key}}
		_, body := adminDo(t, h, "GET", "key", q)
		assert.Equal(t, le.Key, body["key"])
		assert.Equal(t, false, body["decision"].(map[string]any)["allowed"], "the stand-in's state is the long key's")
		code, _ := adminDo(t, h, "POST", "key", q)
		require.Equal(t, http.StatusOK, code)
		require.NoError(t, rule.Check(ctx, l, 1, long), "the reset reached the long key")
	})
}

// TestAdminShowsCachedDenialsCircuitsAndOverrideProblems: the view tells
// how long a deny cache repeats a key's denial, which circuit breakers are
// open since when, and which override fields cannot be used.
func TestAdminShowsCachedDenialsCircuitsAndOverrideProblems(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	c := srv.Client()
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.HSet(ctx, "ratelimit:admin", "cached|key=k", "period=1m treshold=1").Err())
	ov := redislimit.NewOverrides(c, "ratelimit:admin", time.Hour, redislimit.OverridesLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { ov.Close() })
	require.Error(t, ov.Refresh(ctx))
	l := redislimit.New(c, ratelimit.WithOverrides(ov))
	rule := &ratelimit.Rule{Name: "cached", Limits: perPeriod(1, time.Hour)}
	h := AdminHandler(wrapped{l}, []*ratelimit.Rule{rule})
	require.NoError(t, rule.Check(ctx, l, 1, "k"))
	require.ErrorIs(t, rule.Check(ctx, l, 1, "k"), ratelimit.ErrLimited)
	_, body := adminDo(t, h, "GET", "key", url.Values{"name": {"cached"}, "key": {"k"}})
	left, err := time.ParseDuration(body["cached_for"].(string))
	require.NoError(t, err, "%v", body)
	assert.Positive(t, left)
	assert.LessOrEqual(t, left, redislimit.DefaultDenyHold)

	_, body = adminDo(t, h, "GET", "limiter", nil)
	assert.Empty(t, body["open_circuits"])
	problems := body["override_problems"].([]any)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], `"cached|key=k"`)

	down := redislimit.New(newUnreachableClient(t), redislimit.WithBreaker(1, time.Hour, time.Hour))
	require.NoError(t, rule.Check(ctx, down, 1, "k"), "fails open")
	_, body = adminDo(t, AdminHandler(down, nil), "GET", "limiter", nil)
	circuits := body["open_circuits"].(map[string]any)
	require.Len(t, circuits, 1)
	for _, since := range circuits {
		at, err := time.Parse(time.RFC3339Nano, since.(string))
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), at, time.Hour)
	}
}
