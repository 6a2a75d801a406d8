package httplimit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// adminDo sends method to h's path with query q and decodes the JSON reply.
func adminDo(t *testing.T, h http.Handler, method, path string, q url.Values) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, "/admin/ratelimit/"+path+"?"+q.Encode(), nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	return rec.Code, body
}

// TestAdminHandler lists rules with their overrides, shows keys' states
// through Peek and resets them only when allowed, on both backends and
// through a wrapper.
func TestAdminHandler(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		ov := &ratelimit.StaticOverrides{}
		ov.SetRule("admin.Search", ratelimit.Limit{Period: time.Minute, Threshold: 3, Algorithm: ratelimit.GCRA})
		l := wrapped{newLimiter(ratelimit.WithOverrides(ov))}
		get := &ratelimit.Rule{Name: "admin.Get", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 3}, {Period: time.Hour, Threshold: 10, Algorithm: ratelimit.FixedWindow}}}
		search := &ratelimit.Rule{Name: "admin.Search", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 30, Algorithm: ratelimit.GCRA, Burst: 5}}, OnError: ratelimit.FailClosed, Wait: time.Second}
		readOnly := AdminHandler(l, []*ratelimit.Rule{get, search})
		full := AdminHandler(l, []*ratelimit.Rule{get, search}, WithAdminReset())

		code, body := adminDo(t, readOnly, "GET", "rules", nil)
		require.Equal(t, http.StatusOK, code)
		require.EqualValues(t, 2, body["total"])
		require.NotContains(t, body, "next")
		rules := body["rules"].([]any)
		g, s := rules[0].(map[string]any), rules[1].(map[string]any)
		require.Equal(t, "admin.Get", g["name"])
		require.Equal(t, false, g["overridden"])
		require.Len(t, g["effective"], 2)
		require.Equal(t, "10/1h0m0s (fixed_window)", g["limits"].([]any)[1].(map[string]any)["text"])
		require.Equal(t, true, s["overridden"])
		require.Equal(t, "deny", s["onerror"])
		require.Equal(t, "1s", s["wait"])
		require.NotContains(t, g, "wait")
		require.Equal(t, map[string]any{"text": "30/1m0s (gcra)", "period": "1m0s", "threshold": 30.0, "algorithm": "gcra", "burst": 5.0}, s["limits"].([]any)[0])
		require.Equal(t, map[string]any{"text": "3/1m0s (gcra)", "period": "1m0s", "threshold": 3.0, "algorithm": "gcra"}, s["effective"].([]any)[0])

		for _, rule := range []*ratelimit.Rule{get, search} {
			q := url.Values{"name": {rule.Name}, "key": {"ada"}}
			require.NoError(t, rule.Check(ctx, l, 1, "ada"))
			require.NoError(t, rule.Check(ctx, l, 1, "ada"))
			code, body = adminDo(t, readOnly, "GET", "key", q)
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.Equal(t, "ada", body["key"])
			require.EqualValues(t, 1, body["cost"])
			d := body["decision"].(map[string]any)
			require.Equal(t, true, d["allowed"], "%v", body)
			require.EqualValues(t, 1, d["remaining"], "2 of 3 admitted (the override's 3 for Search)")
			require.EqualValues(t, 0, d["limit"])

			q.Set("cost", "2")
			_, body = adminDo(t, readOnly, "GET", "key", q)
			d = body["decision"].(map[string]any)
			require.Equal(t, false, d["allowed"], "%v", body)
			retry, err := time.ParseDuration(d["retry_after"].(string))
			require.NoError(t, err)
			require.Positive(t, retry)
			q.Del("cost")

			for _, method := range []string{"POST", "DELETE"} {
				code, _ = adminDo(t, readOnly, method, "key", q)
				require.Equal(t, http.StatusMethodNotAllowed, code, "read-only")
			}
			require.NoError(t, rule.Check(ctx, l, 1, "ada"), "the read-only handler reset nothing; a Peek charged nothing")
			require.ErrorIs(t, rule.Check(ctx, l, 1, "ada"), ratelimit.ErrLimited)

			code, body = adminDo(t, full, "DELETE", "key", q)
			require.Equal(t, http.StatusOK, code, "%v", body)
			require.Equal(t, true, body["reset"])
			_, body = adminDo(t, full, "GET", "key", q)
			require.EqualValues(t, 3, body["decision"].(map[string]any)["remaining"], "%v", body)
			require.NoError(t, rule.Check(ctx, l, 1, "ada"))
		}

		long := strings.Repeat("k", 500)
		_, body = adminDo(t, readOnly, "GET", "key", url.Values{"name": {"admin.Get"}, "key": {long}})
		require.Equal(t, callkey.Bound(long), body["key"])
		require.LessOrEqual(t, len(body["key"].(string)), callkey.MaxStandIn)

		for _, c := range []struct {
			method, path string
			q            url.Values
			code         int
		}{
			{"GET", "key", url.Values{"name": {"nope"}, "key": {"k"}}, http.StatusNotFound},
			{"GET", "key", url.Values{"name": {"admin.Get"}, "cost": {"-1"}}, http.StatusBadRequest},
			{"GET", "key", url.Values{"name": {"admin.Get"}, "cost": {"x"}}, http.StatusBadRequest},
			{"GET", "key", url.Values{"name": {"admin.Get"}, "cost": {"4"}}, http.StatusBadRequest}, // above the capacity
			{"GET", "rules", url.Values{"offset": {"-2"}}, http.StatusBadRequest},
			{"POST", "rules", nil, http.StatusMethodNotAllowed},
			{"PUT", "key", url.Values{"name": {"admin.Get"}}, http.StatusMethodNotAllowed},
			{"GET", "other", nil, http.StatusNotFound},
		} {
			code, body = adminDo(t, full, c.method, c.path, c.q)
			require.Equal(t, c.code, code, "%s %s?%s: %v", c.method, c.path, c.q.Encode(), body)
			require.NotEmpty(t, body["error"])
		}
	})
}

// TestAdminHandlerPages lists 250 rules in pages of 100.
func TestAdminHandlerPages(t *testing.T) {
	var rules []*ratelimit.Rule
	for i := range 250 {
		rules = append(rules, &ratelimit.Rule{Name: fmt.Sprint("rule", i), Limits: perPeriod(1, time.Second)})
	}
	h := AdminHandler(ratelimit.NewMemory(), rules)
	var names []string
	q := url.Values{}
	for range 3 {
		code, body := adminDo(t, h, "GET", "rules", q)
		require.Equal(t, http.StatusOK, code)
		require.EqualValues(t, 250, body["total"])
		page := body["rules"].([]any)
		require.LessOrEqual(t, len(page), adminPage)
		for _, r := range page {
			names = append(names, r.(map[string]any)["name"].(string))
		}
		next, ok := body["next"]
		if !ok {
			break
		}
		q.Set("offset", fmt.Sprint(next))
	}
	require.Len(t, names, 250)
	require.Equal(t, "rule249", names[249])
	_, body := adminDo(t, h, "GET", "rules", url.Values{"offset": {"1000"}})
	require.Empty(t, body["rules"])
}

// TestAdminHandlerBackendDown answers 503 when Redis cannot be reached,
// and 501 for a limiter that cannot peek.
func TestAdminHandlerBackendDown(t *testing.T) {
	rule := &ratelimit.Rule{Name: "down", Limits: perPeriod(1, time.Second)}
	q := url.Values{"name": {"down"}, "key": {"k"}}
	h := AdminHandler(redislimit.New(newUnreachableClient(t)), []*ratelimit.Rule{rule}, WithAdminReset())
	code, _ := adminDo(t, h, "GET", "key", q)
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = adminDo(t, h, "POST", "key", q)
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = adminDo(t, AdminHandler(allowOnly{}, []*ratelimit.Rule{rule}), "GET", "key", q)
	require.Equal(t, http.StatusNotImplemented, code)
}

// TestAdminHandlerShowsAKeysOwnLimits: a key with limits of its own
// (StaticOverrides.SetKey) is shown and peeked under them; the rules list
// shows the rule's.
func TestAdminHandlerShowsAKeysOwnLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ov := &ratelimit.StaticOverrides{}
		ov.SetKey("tiered", "vip", ratelimit.Limit{Period: time.Minute, Threshold: 30})
		l := newLimiter(ratelimit.WithOverrides(ov))
		rule := &ratelimit.Rule{Name: "tiered", Limits: perPeriod(3, time.Minute)}
		h := AdminHandler(l, []*ratelimit.Rule{rule})
		_, body := adminDo(t, h, "GET", "rules", nil)
		require.Equal(t, false, body["rules"].([]any)[0].(map[string]any)["overridden"])
		for key, threshold := range map[string]int64{"vip": 30, "someone": 3} {
			require.NoError(t, rule.Check(context.Background(), l, 1, key))
			_, body = adminDo(t, h, "GET", "key", url.Values{"name": {"tiered"}, "key": {key}})
			require.EqualValues(t, threshold, body["limits"].([]any)[0].(map[string]any)["threshold"], "%s: %v", key, body)
			require.EqualValues(t, threshold-1, body["decision"].(map[string]any)["remaining"], "%s: %v", key, body)
		}
	})
}

// TestAdminHandlerKeyPerLimit: the rules of a key per limit list each
// limit with its key expression, and .../key shows each limit with its
// key, its source and the call's decision, on both backends.
func TestAdminHandlerKeyPerLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		ov := &ratelimit.StaticOverrides{}
		ov.SetKey("admin.Post", "gold", ratelimit.Limit{Period: time.Second, Threshold: 50})
		l := newLimiter(ratelimit.WithOverrides(ov))
		post := &ratelimit.Rule{
			Name:     "admin.Post",
			Limits:   []ratelimit.Limit{{Period: time.Second, Threshold: 10}, {Period: time.Hour, Threshold: 1000}},
			KeyExprs: []string{"user", ""},
		}
		h := AdminHandler(l, []*ratelimit.Rule{post})
		code, body := adminDo(t, h, "GET", "rules", nil)
		require.Equal(t, http.StatusOK, code)
		limits := body["rules"].([]any)[0].(map[string]any)["limits"].([]any)
		require.Equal(t, "user", limits[0].(map[string]any)["key_expr"])
		require.Equal(t, "", limits[1].(map[string]any)["key_expr"])

		require.NoError(t, post.Check(ctx, l, 1, "ada", ""))
		require.NoError(t, post.Check(ctx, l, 1, "gold", ""))
		code, body = adminDo(t, h, "GET", "key", url.Values{"name": {post.Name}, "key": {"ada"}})
		require.Equal(t, http.StatusOK, code, "%v", body)
		lines := body["lines"].([]any)
		require.Len(t, lines, 2)
		first, second := lines[0].(map[string]any), lines[1].(map[string]any)
		require.Equal(t, "ada", first["key"])
		require.Equal(t, "user", first["key_expr"])
		require.Equal(t, "directive", first["from"])
		require.Equal(t, "", second["key"])
		require.EqualValues(t, 9, body["decision"].(map[string]any)["remaining"], "ada's line has 9 left")

		_, body = adminDo(t, h, "GET", "key", url.Values{"name": {post.Name}, "key": {"gold"}})
		first = body["lines"].([]any)[0].(map[string]any)
		require.Equal(t, "key", first["from"])
		require.EqualValues(t, 50, first["threshold"])
		require.EqualValues(t, 49, body["decision"].(map[string]any)["remaining"])
	})
}

// TestAdminHandlerShowsSlots: .../key of a rule with a concurrency limit
// shows how full its slots are (the slot's limit index when it decides,
// the soonest lease's end when full), and a reset frees them, on both
// backends.
func TestAdminHandlerShowsSlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(opts ...ratelimit.Option) ratelimit.Limiter) {
		ctx := context.Background()
		clock := clocktest.NewManual()
		l := newLimiter(ratelimit.WithClock(clock))
		rule := &ratelimit.Rule{Name: "admin.Export", Limits: []ratelimit.Limit{
			{Period: time.Hour, Threshold: 10},
			{Algorithm: "concurrency", Threshold: 2, Period: time.Minute},
		}}
		h := AdminHandler(l, []*ratelimit.Rule{rule}, WithAdminReset())
		q := url.Values{"name": {rule.Name}, "key": {"acme"}}
		peek := func(q url.Values) map[string]any {
			t.Helper()
			code, body := adminDo(t, h, "GET", "key", q)
			require.Equal(t, http.StatusOK, code, "%v", body)
			return body["decision"].(map[string]any)
		}
		d := peek(q)
		require.Equal(t, true, d["allowed"])
		require.EqualValues(t, 1, d["limit"], "the slot, the tightest limit")
		require.EqualValues(t, 2, d["remaining"], "slots free")
		for range 2 {
			_, err := rule.Reserve(ctx, l, 1, "acme")
			require.NoError(t, err)
			clock.Advance(time.Second)
		}
		d = peek(q)
		require.Equal(t, false, d["allowed"])
		require.EqualValues(t, 1, d["limit"])
		require.Equal(t, "58s", d["retry_after"], "the soonest lease's end")
		withCost := url.Values{"name": {rule.Name}, "key": {"acme"}, "cost": {"3"}}
		require.Equal(t, false, peek(withCost)["allowed"])

		code, _ := adminDo(t, h, "DELETE", "key", q)
		require.Equal(t, http.StatusOK, code)
		d = peek(withCost)
		require.Equal(t, true, d["allowed"])
		require.EqualValues(t, 2, d["remaining"], "the reset freed the slots")
	})
}

// TestAdminHandlerShowsTheSlotOfAnOverriddenRule: an override of a rule's
// rate limits leaves its concurrency limit, which .../key shows last and
// counts, with a cost of 1 or more.
func TestAdminHandlerShowsTheSlotOfAnOverriddenRule(t *testing.T) {
	ctx := context.Background()
	ov := &ratelimit.StaticOverrides{}
	ov.SetKey("admin.Export", "acme", ratelimit.Limit{Period: time.Hour, Threshold: 100})
	l := ratelimit.NewMemory(ratelimit.WithOverrides(ov))
	rule := &ratelimit.Rule{Name: "admin.Export", Limits: []ratelimit.Limit{
		{Period: time.Hour, Threshold: 10},
		{Algorithm: "concurrency", Threshold: 1, Period: time.Minute},
	}}
	h := AdminHandler(l, []*ratelimit.Rule{rule})
	res, err := rule.Reserve(ctx, l, 1, "acme")
	require.NoError(t, err)
	defer res.Release(ctx)
	for _, cost := range []string{"1", "5"} {
		code, body := adminDo(t, h, "GET", "key", url.Values{"name": {rule.Name}, "key": {"acme"}, "cost": {cost}})
		require.Equal(t, http.StatusOK, code, "%v", body)
		limits := body["limits"].([]any)
		require.Len(t, limits, 2, "the override's limit, then the slot")
		require.EqualValues(t, 100, limits[0].(map[string]any)["threshold"])
		require.Equal(t, "concurrency", limits[1].(map[string]any)["algorithm"])
		d := body["decision"].(map[string]any)
		require.Equal(t, false, d["allowed"], "cost %s: the slot is held", cost)
		require.EqualValues(t, 1, d["limit"])
	}
}

// TestAdminHandlerShowsLeasedUnits: the key view of a rule with a leased
// line shows the units this process holds in its lease (leased); the
// decision is what the process's next call would get, admitted from the
// lease with its units as remaining (source lease), and the line's state
// counts them as left, not used: used is what the calls took. So for a
// leased first line, and for a leased second line after a per-user one.
func TestAdminHandlerShowsLeasedUnits(t *testing.T) {
	srv.Flush(t)
	c := srv.Client()
	t.Cleanup(func() { c.Close() })
	l := redislimit.New(c)
	t.Cleanup(func() { l.Close() })
	leased := ratelimit.Limit{Period: time.Minute, Threshold: 1000, Algorithm: ratelimit.FixedWindow, Prefetch: time.Minute}
	first := &ratelimit.Rule{Name: "admin.Hot", Limits: []ratelimit.Limit{leased}}
	second := &ratelimit.Rule{Name: "admin.HotSecond", Limits: []ratelimit.Limit{{Period: time.Minute, Threshold: 5000, Algorithm: ratelimit.FixedWindow}, leased}}
	rules := []*ratelimit.Rule{first, second}
	for _, tc := range []struct {
		rule *ratelimit.Rule
		line int
	}{{first, 0}, {second, 1}} {
		for range 3 {
			require.NoError(t, tc.rule.Check(context.Background(), l, 1, "ann"))
		}
		held := l.Held(tc.rule.Name, "ann")
		require.Positive(t, held, "%s: the lease holds units", tc.rule.Name)
		code, body := adminDo(t, AdminHandler(l, rules), "GET", "key", url.Values{"name": {tc.rule.Name}, "key": {"ann"}})
		require.Equal(t, http.StatusOK, code)
		require.EqualValues(t, held, body["leased"], "%s: leased", tc.rule.Name)
		d := body["decision"].(map[string]any)
		require.Equal(t, true, d["allowed"])
		require.Equal(t, "lease", d["source"], "%s: the next call is admitted from the lease", tc.rule.Name)
		require.EqualValues(t, tc.line, d["limit"])
		require.EqualValues(t, held, d["remaining"], "%s: remaining is what the lease holds, as Allow would tell", tc.rule.Name)
		state := body["lines"].([]any)[tc.line].(map[string]any)["state"].(map[string]any)
		require.EqualValues(t, 3, state["used"], "%s: the line's used units are the calls', not the lease's", tc.rule.Name)
		require.EqualValues(t, 1000-3, state["remaining"], "%s: the leased units are left, counted once", tc.rule.Name)

		// The on-call page's lookup says so too.
		req := httptest.NewRequest("GET", "/admin/ratelimit/?"+url.Values{"name": {tc.rule.Name}, "key": {"ann"}}.Encode(), nil)
		rec := httptest.NewRecorder()
		AdminHandler(l, rules).ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, rec.Body.String(), fmt.Sprintf(`<p id="leased">Line %d holds %d units leased`, tc.line, held))
	}
}

// adminPageBody returns the page h serves for on-call.
func adminPageBody(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/admin/ratelimit/", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String()
}
