package redislimit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// tierCase is what an operator sets for rule "tiers" and its key "k".
type tierCase struct {
	name    string
	rule    int64  // the rule's threshold; 0: not set
	gold    int64  // tier gold's threshold; 0: not set
	own     int64  // k's own threshold; 0: not set
	tier    string // k's tier; "": none
	badKey  bool   // k's own limit has another algorithm than the rule's
	wantK   int64  // the threshold k's calls meet
	wantOth int64  // the threshold the calls of another key meet
}

// tierCases is the precedence table: a key's own limits, its tier's, the
// rule's override, the rule's directives; an unusable or missing level
// falls to the next.
var tierCases = []tierCase{
	{name: "directives only", wantK: 2, wantOth: 2},
	{name: "rule", rule: 3, wantK: 3, wantOth: 3},
	{name: "tier over rule", rule: 3, gold: 4, tier: "gold", wantK: 4, wantOth: 3},
	{name: "tier over directives", gold: 4, tier: "gold", wantK: 4, wantOth: 2},
	{name: "own over rule", rule: 3, own: 5, wantK: 5, wantOth: 3},
	{name: "tier set, key not in it", rule: 3, gold: 4, wantK: 3, wantOth: 3},
	{name: "key in a tier not set", rule: 3, tier: "gold", wantK: 3, wantOth: 3},
	{name: "unusable own falls to the rule", rule: 3, own: 5, badKey: true, wantK: 3, wantOth: 3},
}

// tierSource is a KeyOverrides to which a tierCase is applied.
type tierSource struct {
	name  string
	apply func(t *testing.T, c tierCase) ratelimit.KeyOverrides
}

func perMinute(n int64) ratelimit.Limit { return ratelimit.Limit{Period: time.Minute, Threshold: n} }

func tierSources() []tierSource {
	return []tierSource{
		{"static", func(t *testing.T, c tierCase) ratelimit.KeyOverrides {
			s := &ratelimit.StaticOverrides{}
			if c.rule > 0 {
				s.SetRule("tiers", perMinute(c.rule))
			}
			if c.gold > 0 {
				s.SetTier("tiers", "gold", perMinute(c.gold))
			}
			if c.own > 0 {
				l := perMinute(c.own)
				if c.badKey {
					l.Algorithm = ratelimit.FixedWindow
				}
				s.SetKey("tiers", "k", l)
			}
			if c.tier != "" {
				s.SetKeyTier("tiers", "k", c.tier)
			}
			return s
		}},
		{"own type", func(t *testing.T, c tierCase) ratelimit.KeyOverrides {
			return ownKeyOverrides{tierSources()[0].apply(t, c)}
		}},
		{"redis hash", func(t *testing.T, c tierCase) ratelimit.KeyOverrides {
			ctx := context.Background()
			rc := rdb(t)
			const hash = "ratelimit:overrides"
			require.NoError(t, rc.Del(ctx, hash).Err())
			set := func(field, value string) { require.NoError(t, rc.HSet(ctx, hash, field, value).Err()) }
			if c.rule > 0 {
				set("tiers", fmt.Sprintf("period=1m threshold=%d", c.rule))
			}
			if c.gold > 0 {
				set("tiers|tier=gold", fmt.Sprintf("period=1m threshold=%d", c.gold))
			}
			if c.own > 0 {
				alg := ""
				if c.badKey {
					alg = " algorithm=fixed_window"
				}
				set("tiers|key=k", fmt.Sprintf("period=1m threshold=%d%s", c.own, alg))
			}
			if c.tier != "" {
				set("tiers|key=k", "tier="+c.tier)
			}
			ov := NewOverrides(rc, hash, time.Hour)
			// The first read, started in the background, could end after
			// the limiter flushes the server: wait for it, then read.
			<-ov.first
			err := ov.Refresh(ctx)
			if c.tier != "" && c.gold == 0 {
				require.ErrorIs(t, err, ratelimit.ErrInvalidLimit, "a key in a tier the hash does not set is reported")
				assert.Contains(t, err.Error(), `ratelimit:overrides "tiers|key=k": ratelimit: invalid limit: tier "gold" is not set`)
			} else {
				require.NoError(t, err)
			}
			return ov
		}},
	}
}

// ownKeyOverrides is a KeyOverrides of another package's kind, which
// Rule.Check asks through the interface.
type ownKeyOverrides struct{ src ratelimit.KeyOverrides }

func (o ownKeyOverrides) Lookup(ctx context.Context, name string) ([]ratelimit.Limit, bool) {
	return o.src.Lookup(ctx, name)
}

func (o ownKeyOverrides) LookupKey(ctx context.Context, name, key string) ([]ratelimit.Limit, bool) {
	return o.src.LookupKey(ctx, name, key)
}

func (o ownKeyOverrides) Tier(name, key string) string { return o.src.Tier(name, key) }

// admitted counts the calls of key that rule admits in a row, up to 20.
func admitted(t *testing.T, l ratelimit.Limiter, rule *ratelimit.Rule, key string) int64 {
	t.Helper()
	for n := int64(0); n < 20; n++ {
		if err := rule.Check(context.Background(), l, 1, key); err != nil {
			require.ErrorIs(t, err, ratelimit.ErrLimited)
			return n
		}
	}
	return 20
}

func TestKeyOverridesPrecedence(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		for _, src := range tierSources() {
			for _, c := range tierCases {
				t.Run(src.name+"/"+c.name, func(t *testing.T) {
					ov := src.apply(t, c) // read now: the Redis limiter flushes the server
					l := newLimiter(ratelimit.WithClock(newManualClock()), ratelimit.WithOverrides(ov))
					rule := &ratelimit.Rule{Name: "tiers", Limits: perPeriod(2, time.Minute)}
					assert.Equal(t, c.wantK, admitted(t, l, rule, "k"), "key k")
					assert.Equal(t, c.wantOth, admitted(t, l, rule, "other"), "another key")
				})
			}
		}
	})
}

func TestKeyOverrideKeepsState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		ov := &ratelimit.StaticOverrides{}
		l := newLimiter(ratelimit.WithClock(newManualClock()), ratelimit.WithOverrides(ov))
		rule := &ratelimit.Rule{Name: "state", Limits: perPeriod(5, time.Minute)}
		ctx := context.Background()
		for range 3 {
			require.NoError(t, rule.Check(ctx, l, 1, "k"))
		}

		ov.SetKey("state", "k", perMinute(4))
		require.NoError(t, rule.Check(ctx, l, 1, "k"), "4th of 4: the 3 calls before still count")
		var le *ratelimit.LimitError
		require.ErrorAs(t, rule.Check(ctx, l, 1, "k"), &le)
		assert.Equal(t, int64(4), le.Limit.Threshold, "the error names the key's limit")

		ov.SetTier("state", "gold", perMinute(6))
		ov.SetKeyTier("state", "k", "gold")
		require.NoError(t, rule.Check(ctx, l, 1, "k"), "5th of gold's 6")
		require.NoError(t, rule.Check(ctx, l, 1, "k"), "6th of gold's 6")
		require.ErrorIs(t, rule.Check(ctx, l, 1, "k"), ratelimit.ErrLimited)

		ov.SetKeyTier("state", "k", "") // back to the rule's 5, with 6 made
		require.ErrorIs(t, rule.Check(ctx, l, 1, "k"), ratelimit.ErrLimited)
		for range 5 {
			require.NoError(t, rule.Check(ctx, l, 1, "other"), "other keys keep the rule's limit")
		}
		require.ErrorIs(t, rule.Check(ctx, l, 1, "other"), ratelimit.ErrLimited)

		ov.SetKey("state", "k", perMinute(7))
		require.NoError(t, rule.Check(ctx, l, 1, "k"), "7th of 7")
		require.ErrorIs(t, rule.Check(ctx, l, 1, "k"), ratelimit.ErrLimited)
	})
}

// longKey is a key whose limiters keep a stand-in for it.
var longKey = "Bearer " + strings.Repeat("eyJhbGciOiJIUzI1NiIsInR5c", 4)

func TestHostileKeysCannotReachAnotherKeysOverride(t *testing.T) {
	standIn := callkey.Bound(longKey)
	require.True(t, callkey.IsStandIn(standIn))
	require.NotEqual(t, longKey, standIn)
	ctx := context.Background()
	rc := rdb(t)
	const hash = "ratelimit:hostile"
	require.NoError(t, rc.Del(ctx, hash).Err())
	require.NoError(t, rc.HSet(ctx, hash,
		"h|key="+standIn, "period=1m threshold=11", // the long key, by its stand-in
		"h|key=a|key=b", "period=1m threshold=12", // the key "a|key=b"
		"h|key=x\x00y{}:%", "period=1m threshold=13",
		"h|key=", "period=1m threshold=14", // the empty key
		"h|tier=t", "period=1m threshold=15",
		"h|key=tier=t", "tier=t", // the key "tier=t", in tier t
	).Err())
	ro := NewOverrides(rc, hash, time.Hour)
	require.NoError(t, ro.Refresh(ctx))
	so := &ratelimit.StaticOverrides{}
	so.SetKey("h", longKey, perMinute(11)) // the long key, by itself
	so.SetKey("h", "a|key=b", perMinute(12))
	so.SetKey("h", "x\x00y{}:%", perMinute(13))
	so.SetKey("h", "", perMinute(14))
	so.SetTier("h", "t", perMinute(15))
	so.SetKeyTier("h", "tier=t", "t")

	want := map[string]int64{longKey: 11, "a|key=b": 12, "x\x00y{}:%": 13, "": 14, "tier=t": 15}
	hostile := []string{
		standIn,                  // the stand-in as a key is another long key
		standIn[:len(standIn)-1], // a stand-in's look-alikes
		longKey + "x", longKey[:len(longKey)-1],
		"a", "b", "a|key=", "key=b", "|key=a|key=b", "h|key=a|key=b",
		"x", "x\x00y", "x%00y{}:%", "x\x00y%7B%7D%3A%25",
		"t", "tier=", "tier=t ", " ", "\x00",
	}
	for _, src := range []ratelimit.KeyOverrides{ro, so} {
		for key, n := range want {
			got, ok := src.LookupKey(ctx, "h", key)
			if assert.True(t, ok, "%T %q", src, key) {
				assert.Equal(t, n, got[0].Threshold, "%T %q", src, key)
			}
			_, ok = src.LookupKey(ctx, "other", key)
			assert.False(t, ok, "another rule's key %q", key)
		}
		for _, key := range hostile {
			got, ok := src.LookupKey(ctx, "h", key)
			assert.False(t, ok, "%T: key %q reached %v", src, key, got)
		}
		_, ok := src.Lookup(ctx, "h")
		assert.False(t, ok, "no key field is the rule's")
	}

	// And through a limiter: the stand-in, sent as a key, is limited as
	// any key; the long key by its override.
	l := newTestRedis(t, ratelimit.WithClock(newManualClock()), ratelimit.WithOverrides(so))
	rule := &ratelimit.Rule{Name: "h", Limits: perPeriod(1, time.Minute)}
	assert.Equal(t, int64(1), admitted(t, l, rule, standIn))
	assert.Equal(t, int64(11), admitted(t, l, rule, longKey))
}

func TestRedisOverridesFields(t *testing.T) {
	ctx := context.Background()
	rc := rdb(t)
	const hash = "ratelimit:fields"
	require.NoError(t, rc.Del(ctx, hash).Err())
	require.NoError(t, rc.HSet(ctx, hash,
		"a|b", "period=1m threshold=1", // not a rule: '|' must qualify a key or a tier
		"r|tier=", "period=1m threshold=2",
		"r|tier=gold silver", "period=1m threshold=2",
		"r|tier=gold", "period=1m",
		"r|key=k", "tier=",
		"r|key=j", "tier=gold period=1m threshold=1",
		"r|key="+longKey, "period=1m threshold=3",
		"r|key="+callkey.Bound(longKey), "period=1m threshold=4",
	).Err())
	ov := NewOverrides(rc, hash, time.Hour)
	err := ov.Refresh(ctx)
	require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
	for _, want := range []string{
		`"r|tier=": ratelimit: invalid limit: tier "": want 1 to 64 letters`,
		`"r|tier=gold silver": ratelimit: invalid limit: tier "gold silver"`,
		`"r|tier=gold": `,
		`"r|key=k": ratelimit: invalid limit: tier ""`,
		`"r|key=j": `,
		`is set by another field too`,
		`"a|b": ratelimit: invalid limit: unknown qualifier "b" after '|'`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	_, ok := ov.Lookup(ctx, "a|b")
	assert.False(t, ok, "a field whose '|' qualifies neither a key nor a tier sets nothing")
	got, ok := ov.LookupKey(ctx, "r", longKey)
	if assert.True(t, ok) {
		assert.Equal(t, int64(4), got[0].Threshold, "of two fields of one key, the first in order (the stand-in's) applies")
	}
}

// TestKeyOverridesCostNoAllocation checks that looking up a call's limits
// allocates nothing when its rule has no key overrides, whatever the key's
// length, and for a short key when it has some.
func TestKeyOverridesCostNoAllocation(t *testing.T) {
	ctx := context.Background()
	rule := &ratelimit.Rule{Name: "r", Limits: perPeriod(5, time.Minute)}
	keyed := &ratelimit.Rule{Name: "keyed", Limits: perPeriod(5, time.Minute)}
	s := &ratelimit.StaticOverrides{}
	s.SetRule("r", perMinute(7))
	s.SetKey("keyed", "vip", perMinute(9))
	rc := rdb(t)
	require.NoError(t, rc.Del(ctx, "ratelimit:allocs").Err())
	require.NoError(t, rc.HSet(ctx, "ratelimit:allocs", "r", "period=1m threshold=7", "keyed|key=vip", "period=1m threshold=9").Err())
	ro := NewOverrides(rc, "ratelimit:allocs", time.Hour)
	require.NoError(t, ro.Refresh(ctx))
	for _, src := range []ratelimit.Overrides{s, ro} {
		for _, c := range []struct {
			rule *ratelimit.Rule
			key  string
			want int64
		}{{rule, longKey, 7}, {rule, "k", 7}, {keyed, "k", 5}, {keyed, "vip", 9}, {keyed, "a-key-of-40-bytes-0123456789012345678901", 5}} {
			var got []ratelimit.Limit
			l := ratelimit.NewMemory(ratelimit.WithOverrides(src))
			allocs := fewestAllocs(func() { got = c.rule.EffectiveLimits(ctx, l, c.key) })
			assert.Zero(t, allocs, "%T %s %q", src, c.rule.Name, c.key)
			assert.Equal(t, c.want, got[0].Threshold, "%T %s %q", src, c.rule.Name, c.key)
		}
	}

	// A whole call allocates no more with key overrides of other rules
	// than without overrides.
	m := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()))
	mo := ratelimit.NewMemory(ratelimit.WithClock(newManualClock()), ratelimit.WithOverrides(s))
	none := &ratelimit.Rule{Name: "none", Limits: perPeriod(1<<40, time.Minute)}
	base := fewestAllocs(func() { _ = none.Check(ctx, m, 1, longKey) })
	with := fewestAllocs(func() { _ = none.Check(ctx, mo, 1, longKey) })
	assert.Equal(t, base, with)
}

// TestKeyOverridesReachTheFallback checks that while Redis is down a
// FailLocal rule's local fallback decides each key against its own limits.
func TestKeyOverridesReachTheFallback(t *testing.T) {
	ov := &ratelimit.StaticOverrides{}
	ov.SetTier("fb", "gold", perMinute(4))
	ov.SetKeyTier("fb", "acme", "gold")
	ov.SetKey("fb", "initech", perMinute(1))
	l := downLimiter(t, stoppedAddr(t), ratelimit.WithOverrides(ov), ratelimit.WithClock(newManualClock()))
	rule := &ratelimit.Rule{Name: "fb", Limits: perPeriod(2, time.Minute), OnError: ratelimit.FailLocal}
	assert.Equal(t, int64(4), admitted(t, l, rule, "acme"))
	assert.Equal(t, int64(1), admitted(t, l, rule, "initech"))
	assert.Equal(t, int64(2), admitted(t, l, rule, "other"))
}

// keyOverrides reads rule, tier and key overrides from a hash in the
// cluster and decides keys that live on different masters by them.
func (ct *clusterTest) keyOverrides(t *testing.T) {
	ctx := context.Background()
	_, c := ct.limiter(t)
	const hash = "ratelimit:overrides"
	require.NoError(t, c.HSet(ctx, hash,
		"co", "period=1m threshold=3",
		"co|tier=gold", "period=1m threshold=5",
		"co|key="+longKey, "tier=gold",
		"co|key=initech", "period=1m threshold=1",
	).Err())
	ov := NewOverrides(c, hash, time.Hour)
	require.NoError(t, ov.Refresh(ctx))
	l := New(c, ratelimit.WithClock(newManualClock()), ratelimit.WithOverrides(ov))
	rule := &ratelimit.Rule{Name: "co", Limits: perPeriod(2, time.Minute)}
	want := map[string]int64{longKey: 5, "initech": 1}
	for i := range 20 {
		want[fmt.Sprintf("user-%d", i)] = 3
	}
	for key, n := range want {
		assert.Equal(t, n, admitted(t, l, rule, key), "key %q", key)
	}
	assert.Greater(t, len(keysByMaster(t, c)), 1, "the keys' state spreads over the masters")
}

// TestKeyOverridesMeetTheDenyCache checks that the Redis limiter's deny
// cache repeats a denial only under the limits it was made under: a key
// whose override changes is decided by Redis again, and a key of the same
// rule under other limits never meets another key's remembered denial.
func TestKeyOverridesMeetTheDenyCache(t *testing.T) {
	ctx := context.Background()
	ov := &ratelimit.StaticOverrides{}
	ov.SetKey("dc", "vip", perMinute(3))
	metrics := &limitmetrics.Metrics{}
	l := newCachedRedis(t, ratelimit.WithClock(newManualClock()), ratelimit.WithOverrides(ov), ratelimit.WithHook(metrics))
	rule := &ratelimit.Rule{Name: "dc", Limits: perPeriod(1, time.Minute)}
	cached := func() uint64 { return metrics.Snapshot()["dc"].Cached }

	require.NoError(t, rule.Check(ctx, l, 1, "k"))
	require.ErrorIs(t, rule.Check(ctx, l, 1, "k"), ratelimit.ErrLimited)
	require.ErrorIs(t, rule.Check(ctx, l, 1, "k"), ratelimit.ErrLimited)
	require.Equal(t, uint64(1), cached(), "k's second denial is repeated")

	ov.SetKey("dc", "k", perMinute(2)) // k's limit rises: Redis decides again
	require.NoError(t, rule.Check(ctx, l, 1, "k"), "2nd of k's 2")
	var le *ratelimit.LimitError
	require.ErrorAs(t, rule.Check(ctx, l, 1, "k"), &le)
	assert.Equal(t, int64(2), le.Limit.Threshold)

	for range 3 {
		require.NoError(t, rule.Check(ctx, l, 1, "vip"), "vip's 3, whatever k's denials")
	}
	before := cached()
	require.ErrorIs(t, rule.Check(ctx, l, 1, "vip"), ratelimit.ErrLimited)
	assert.Equal(t, before, cached(), "vip's first denial comes from Redis")
}
