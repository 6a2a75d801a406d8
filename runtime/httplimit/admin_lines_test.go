package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestAdminDigestsARawKeyOfAKeyhashRule is issue 29's finding that
// .../key?key=<raw API key> of a keyhash=true rule answered allowed:true,
// remaining:20, from:directive while that key was blocked: the view
// looked up the raw key, which the limiter never sees. It now digests the
// key as the decorator does.
func TestAdminDigestsARawKeyOfAKeyhashRule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		l := newLimiter()
		rule := &ratelimit.Rule{Name: "secret", Limits: perPeriod(20, time.Minute), KeyHash: []bool{true}}
		raw := "sk_live_abc"
		for range 20 {
			require.NoError(t, rule.Check(ctx, l, 1, ratelimit.KeyDigest(raw)))
		}
		code, body := adminDo(t, AdminHandler(l, []*ratelimit.Rule{rule}), "GET", "key", url.Values{"name": {"secret"}, "key": {raw}})
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.Equal(t, false, body["decision"].(map[string]any)["allowed"], "the raw key's digest is blocked: %v", body)
		require.Equal(t, ratelimit.KeyDigest(raw), body["key"])
	})
}

// TestAdminLooksUpTheDigestsOnCallSees is issue 35's finding that the
// lookup given a key as the page and logs show it (sha256: and 12 hex
// digits), or a keyhash=true key's whole digest, hashed it again and
// answered allowed:true for a key that was blocked. The whole digest,
// written sha256:<64 hex digits>, is looked up as the limiter keeps the
// key, one key or a key per line; the redacted form is refused, saying
// what to give, on a keyhash=true rule and on any other, until the key is
// among the most denied, whose lookup the page links to: then it answers
// for that key, showing it redacted.
func TestAdminLooksUpTheDigestsOnCallSees(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		l := newLimiter()
		raw := "sk_live_abc"
		digest := ratelimit.KeyDigest(raw)
		secret := &ratelimit.Rule{Name: "secret", Limits: perPeriod(20, time.Minute), KeyHash: []bool{true}}
		lines := &ratelimit.Rule{Name: "lines", Limits: perPeriod(20, time.Minute), KeyExprs: []string{"token"}, KeyHash: []bool{true}}
		plain := &ratelimit.Rule{Name: "plain", Limits: perPeriod(20, time.Minute)}
		for range 20 {
			require.NoError(t, secret.Check(ctx, l, 1, digest))
			require.NoError(t, lines.Check(ctx, l, 1, digest))
			require.NoError(t, plain.Check(ctx, l, 1, raw))
		}
		h := AdminHandler(l, []*ratelimit.Rule{secret, lines, plain})
		for _, name := range []string{"secret", "lines"} {
			code, body := adminDo(t, h, "GET", "key", url.Values{"name": {name}, "key": {"sha256:" + digest}})
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.Equal(t, false, body["decision"].(map[string]any)["allowed"], "%s: the digest names the blocked key: %v", name, body)
		}
		for _, name := range []string{"secret", "lines", "plain"} {
			code, body := adminDo(t, h, "GET", "key", url.Values{"name": {name}, "key": {ratelimit.RedactKey(digest, true)}})
			require.Equal(t, http.StatusBadRequest, code, "%s: %v", name, body)
			require.Contains(t, body["error"], "redacted form", name)
			require.Contains(t, body["error"], "give the key itself", name)
		}
		code, body := adminDo(t, h, "GET", "key", url.Values{"name": {"plain"}, "key": {raw}})
		require.Equal(t, http.StatusOK, code, "%v", body)
		require.Equal(t, false, body["decision"].(map[string]any)["allowed"], "the raw key of a plain rule: %v", body)

		// Denied once each: the most-denied keys list them, and the
		// redacted form the page shows and links to looks each up.
		require.ErrorIs(t, secret.Check(ctx, l, 1, digest), ratelimit.ErrLimited)
		require.ErrorIs(t, lines.Check(ctx, l, 1, digest), ratelimit.ErrLimited)
		require.ErrorIs(t, plain.Check(ctx, l, 1, raw), ratelimit.ErrLimited)
		redacted := map[string]string{"secret": ratelimit.RedactKey(digest, true), "lines": ratelimit.RedactKey(digest, true), "plain": ratelimit.RedactKey(raw, false)}
		for name, key := range redacted {
			code, body := adminDo(t, h, "GET", "key", url.Values{"name": {name}, "key": {key}})
			require.Equal(t, http.StatusOK, code, "%s: %v", name, body)
			require.Equal(t, false, body["decision"].(map[string]any)["allowed"], "%s: the redacted form names the blocked key: %v", name, body)
			require.NotContains(t, fmt.Sprint(body), raw, "%s: the raw key is not shown", name)
		}
		page := adminPageBody(t, h)
		link := `href="?name=plain&amp;key=` + strings.Replace(redacted["plain"], ":", "%3a", 1) + `#lookup"`
		require.Contains(t, page, link, "the most-denied table links to the lookup")
	})
}

// TestAdminShowsEveryLinesUsage is issue 29's finding that the view
// probed at cost 1 and showed the tightest limit only ("remaining 2" for
// a tenant that had spent 5,120 tokens of its month): .../key now shows
// each line with its key, its budget, the units used and left, and its
// reset, for a rule of one key and for one with a key per line and a
// shared line.
func TestAdminShowsEveryLinesUsage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		l := newLimiter()
		tokens := &ratelimit.Rule{Name: "tokens", Limits: []ratelimit.Limit{
			{Period: time.Second, Threshold: 4},
			{Algorithm: ratelimit.TokenBucket, Period: time.Hour, Threshold: 1000, Burst: 10000},
		}}
		require.NoError(t, tokens.Check(ctx, l, 2, "acme")) // 4 of each line's units
		require.NoError(t, tokens.Check(ctx, l, 2, "acme"))
		_, err := tokens.Admit(ctx, l, 2, "acme")
		require.ErrorIs(t, err, ratelimit.ErrLimited, "the per-second line is spent")
		rules := []*ratelimit.Rule{tokens}
		code, body := adminDo(t, AdminHandler(l, rules), "GET", "key", url.Values{"name": {"tokens"}, "key": {"acme"}, "cost": {"3"}})
		require.Equal(t, http.StatusOK, code, "%v", body)
		lines := body["lines"].([]any)
		require.Len(t, lines, 2)
		second := lines[0].(map[string]any)["state"].(map[string]any)
		require.EqualValues(t, 4, second["budget"])
		require.EqualValues(t, 4, second["used"])
		require.EqualValues(t, 0, second["remaining"])
		bucket := lines[1].(map[string]any)["state"].(map[string]any)
		require.EqualValues(t, 10000, bucket["budget"])
		require.InDelta(t, 4, bucket["used"], 1, "the bucket refills continuously: %v", bucket)
		require.Equal(t, true, bucket["allowed"], "a call of 3 fits the bucket")
		require.Equal(t, false, body["decision"].(map[string]any)["allowed"], "the call of 3 is denied, by the first line")

		// A key per line, with a shared line.
		quota := &ratelimit.Rule{
			Name:     "search",
			Limits:   []ratelimit.Limit{{Period: time.Minute, Threshold: 6000}, {Calendar: "month", Threshold: 8000}},
			KeyExprs: []string{"apiKey", "tenant"},
			Shared:   []string{"", "tenant-quota"},
		}
		for range 3 {
			require.NoError(t, quota.Check(ctx, l, 1706, "k1", "acme")) // 5,118 tokens
		}
		code, body = adminDo(t, AdminHandler(l, []*ratelimit.Rule{quota}), "GET", "key", url.Values{"name": {"search"}, "key": {"k1", "acme"}})
		require.Equal(t, http.StatusOK, code, "%v", body)
		lines = body["lines"].([]any)
		require.Len(t, lines, 2)
		perKey, month := lines[0].(map[string]any), lines[1].(map[string]any)
		require.Equal(t, "k1", perKey["key"])
		require.EqualValues(t, 5118, perKey["state"].(map[string]any)["used"])
		require.EqualValues(t, 882, perKey["state"].(map[string]any)["remaining"])
		require.Equal(t, "acme", month["key"])
		require.Equal(t, "tenant-quota", month["shared"])
		require.EqualValues(t, 8000, month["state"].(map[string]any)["budget"])
		require.EqualValues(t, 5118, month["state"].(map[string]any)["used"])
		require.EqualValues(t, 2882, month["state"].(map[string]any)["remaining"])
	})
}

// TestAdminListsASharedNameOnce is issue 29's finding that .../rules
// listed a name shared by several methods (name=) once per method.
func TestAdminListsASharedNameOnce(t *testing.T) {
	get := &ratelimit.Rule{Name: "store", Limits: perPeriod(5, time.Second)}
	put := &ratelimit.Rule{Name: "store", Limits: perPeriod(5, time.Second)}
	other := &ratelimit.Rule{Name: "other", Limits: perPeriod(5, time.Second)}
	code, body := adminDo(t, AdminHandler(ratelimit.NewMemory(), []*ratelimit.Rule{get, put, other}), "GET", "rules", nil)
	require.Equal(t, http.StatusOK, code)
	require.EqualValues(t, 2, body["total"])
	require.Len(t, body["rules"].([]any), 2)
}
