package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/denied"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// TestDenialsListTheMostDenied: among a hundred thousand keys denied once
// each, from many goroutines, the keys denied most stand first with at
// least their true counts; memory stays within the summaries' slots;
// keys are held redacted; what is older than five minutes is gone.
func TestDenialsListTheMostDenied(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	d := NewDenials()
	d.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	deny := func(name, key string) {
		d.Decided(context.Background(), &ratelimit.Request{Name: name, Key: key}, ratelimit.Decision{})
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 12_500 {
				deny("svc.Get", fmt.Sprintf("user-%d-%d", g, i))
				if i%10 == 0 {
					deny("svc.Get", "mallory") // 1,250 per goroutine: 10,000
				}
				if i%50 == 0 {
					deny("svc.List", "eve") // 250 per goroutine: 2,000
				}
			}
		})
	}
	wg.Wait()
	d.Decided(context.Background(), &ratelimit.Request{Name: "svc.Get", Key: "ada"}, ratelimit.Decision{Allowed: true})
	top := d.top(3)
	require.Len(t, top, 3)
	assert.Equal(t, []string{"svc.Get", "svc.List"}, []string{top[0].Name, top[1].Name})
	assert.Equal(t, []string{"mallory", "eve"}, []string{top[0].Key, top[1].Key}, "kept as the limiter keeps them, redacted when shown")
	assert.GreaterOrEqual(t, top[0].Count, int64(10_000))
	assert.LessOrEqual(t, top[0].Count-top[0].Error, int64(10_000), "the error bounds the overcount")
	assert.GreaterOrEqual(t, top[1].Count, int64(2_000))
	held := 0
	for i := range d.shards {
		held += len(d.shards[i].Top(1<<20, now))
	}
	assert.LessOrEqual(t, held, denialShards*denied.Slots, "one minute's summaries")

	clock.Lock()
	now = now.Add(4 * time.Minute)
	clock.Unlock()
	deny("svc.Get", "late")
	assert.Equal(t, "mallory", d.top(1)[0].Key, "still within five minutes")
	clock.Lock()
	now = now.Add(2 * time.Minute)
	clock.Unlock()
	assert.Equal(t, []denied.Entry{{Name: "svc.Get", Key: "late", Count: 1}}, d.top(10), "older minutes are gone")
}

// TestAdminListsTheMostDeniedKeys: the admin view lists a limiter's
// most-denied keys, redacted, on both backends.
func TestAdminListsTheMostDeniedKeys(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		denials := NewDenials()
		l := newLimiter(ratelimit.WithHook(denials))
		rule := &ratelimit.Rule{Name: "abused", Limits: perPeriod(1, time.Hour)}
		for range 20 {
			_ = rule.Check(ctx, l, 1, "api-key-of-mallory")
		}
		_ = rule.Check(ctx, l, 1, "ada")
		code, body := adminDo(t, AdminHandler(l, []*ratelimit.Rule{rule}, WithDenials(denials)), "GET", "denied", nil)
		require.Equal(t, http.StatusOK, code)
		denied := body["denied"].([]any)
		require.Len(t, denied, 1)
		first := denied[0].(map[string]any)
		assert.Equal(t, callkey.Redact("api-key-of-mallory"), first["key"])
		assert.Equal(t, float64(19), first["denials"])
		assert.NotContains(t, fmt.Sprint(body), "mallory")
		code, _ = adminDo(t, AdminHandler(allowOnly{l}, nil), "GET", "denied", nil)
		assert.Equal(t, http.StatusNotFound, code, "without WithDenials, of a limiter that counts none")
	})
}

// allowOnly is a limiter that offers Allow alone: no DenialCounter.
type allowOnly struct{ l ratelimit.Limiter }

func (a allowOnly) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return a.l.Allow(ctx, req)
}

func (a allowOnly) Do(_ context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.Unsupported(a, op.Kind)
}

func (allowOnly) Abilities() ratelimit.Abilities { return ratelimit.Abilities{} }

// TestAdminListsTheFleetsDenials: the replica that answers .../denied
// lists the denials of another replica on the same Redis.
func TestAdminListsTheFleetsDenials(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	var replicas []ratelimit.Limiter
	for range 2 {
		c := srv.Client()
		t.Cleanup(func() { c.Close() })
		l := redislimit.New(c, redislimit.WithDenyCache(0))
		t.Cleanup(func() { l.Close() })
		replicas = append(replicas, l)
	}
	rule := &ratelimit.Rule{Name: "abused", Limits: perPeriod(1, time.Hour)}
	for range 6 {
		_ = rule.Check(ctx, replicas[0], 1, "mallory")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := adminDo(t, AdminHandler(replicas[1], []*ratelimit.Rule{rule}), "GET", "denied", nil)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "limiter", body["source"])
		if denied := body["denied"].([]any); len(denied) == 1 {
			assert.Equal(t, callkey.Redact("mallory"), denied[0].(map[string]any)["key"])
			assert.EqualValues(t, 5, denied[0].(map[string]any)["denials"])
			return
		}
		require.True(t, time.Now().Before(deadline), "replica 0's denials never reached replica 1's view")
		time.Sleep(50 * time.Millisecond)
	}
}
