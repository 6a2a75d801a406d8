package guard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestDenyCacheNeverHoldsACooldownsDenial: behind a deny cache that holds
// denials for an hour, a key whose line cooled is denied while it cools
// (by the cooldown, never from the cache) and admitted as soon as the
// cooldown ends; a limit's own denial is still repeated from the cache.
func TestDenyCacheNeverHoldsACooldownsDenial(t *testing.T) {
	ctx := context.Background()
	l := guard.Wrap(ratelimit.NewMemory(), guard.WithDenyCache(64), guard.WithDenyHold(time.Hour))
	t.Cleanup(func() { guard.Close(l) })
	r := &ratelimit.Rule{Name: "cooled", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2, Cooldown: true}}}
	const span = 50 * time.Millisecond
	if err := r.Cooldown(ctx, l, 0, "k", span); err != nil {
		t.Fatal(err)
	}
	cooledAt := time.Now()
	for range 3 {
		d, err := r.Admit(ctx, l, 1, "k")
		if !errors.Is(err, ratelimit.ErrLimited) {
			t.Fatalf("a call while the key cools: %+v, %v", d, err)
		}
	}
	p, err := r.Peek(ctx, l, "k")
	if err != nil || p.Source != ratelimit.SourceCooldown {
		t.Fatalf("Peek while the key cools: %+v, %v; want the cooldown's denial", p, err)
	}
	time.Sleep(span - time.Since(cooledAt) + 5*time.Millisecond)
	for i := range 2 {
		if err := r.Check(ctx, l, 1, "k"); err != nil {
			t.Fatalf("call %d once the cooldown ended: %v (a denial held past the cooldown's end)", i, err)
		}
	}
	if _, err := r.Admit(ctx, l, 1, "k"); !errors.Is(err, ratelimit.ErrLimited) {
		t.Fatalf("the third call of a limit of 2: %v", err)
	}
	p, err = r.Peek(ctx, l, "k")
	if err != nil || p.Allowed || p.Source == ratelimit.SourceCooldown {
		t.Fatalf("Peek of the full limit: %+v, %v; want the limit's own denial", p, err)
	}
}
