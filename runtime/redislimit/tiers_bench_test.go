package redislimit

import (
	"context"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkOverridesLookup is what finding a call's limits costs on the
// per-call path (Rule.EffectiveLimits), by source: a rule override in the Redis
// hash (before per-key overrides, the only kind), a rule of which other
// keys have overrides, a key's own, a key's tier's and a long key of a rule
// without key overrides. A plain map read, the floor, is the baseline.
func BenchmarkOverridesLookup(b *testing.B) {
	ctx := context.Background()
	rc := rdb(b)
	const hash = "ratelimit:bench-overrides"
	if err := rc.HSet(ctx, hash,
		"rule", "period=1m threshold=500",
		"keyed", "period=1m threshold=500",
		"keyed|tier=gold", "period=1m threshold=5000",
		"keyed|key=acme", "tier=gold",
		"keyed|key=initech", "period=1m threshold=50",
	).Err(); err != nil {
		b.Fatal(err)
	}
	ro := NewOverrides(rc, hash, time.Hour)
	if err := ro.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	static := &ratelimit.StaticOverrides{}
	static.SetRule("keyed", perMinute(500))
	static.SetKey("keyed", "initech", perMinute(50))
	rule := &ratelimit.Rule{Name: "rule", Limits: perPeriod(100, time.Minute)}
	keyed := &ratelimit.Rule{Name: "keyed", Limits: perPeriod(100, time.Minute)}
	m := map[string][]ratelimit.Limit{"rule": perPeriod(500, time.Minute)}
	var sink []ratelimit.Limit
	b.Run("map_read", func(b *testing.B) {
		for b.Loop() {
			sink = m[rule.Name]
		}
	})
	for _, c := range []struct {
		name string
		src  ratelimit.Overrides
		rule *ratelimit.Rule
		key  string
	}{
		{"redis_rule", ro, rule, "user-42"},
		{"redis_rule_long_key", ro, rule, longKey},
		{"redis_keyed_other_key", ro, keyed, "user-42"},
		{"redis_keyed_own", ro, keyed, "initech"},
		{"redis_keyed_tier", ro, keyed, "acme"},
		{"static_keyed_other_key", static, keyed, "user-42"},
	} {
		l := ratelimit.NewMemory(ratelimit.WithOverrides(c.src))
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = c.rule.EffectiveLimits(ctx, l, c.key)
			}
		})
	}
	_ = sink
}
