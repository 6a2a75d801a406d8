package redislimit

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// mapOverrides is an Overrides an operator changes while calls run.
type mapOverrides struct {
	mu sync.Mutex
	m  map[string][]ratelimit.Limit
}

func (o *mapOverrides) set(name string, limits ...ratelimit.Limit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string][]ratelimit.Limit{}
	}
	if limits == nil {
		delete(o.m, name)
		return
	}
	o.m[name] = limits
}

func (o *mapOverrides) Lookup(_ context.Context, name string) ([]ratelimit.Limit, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.m[name]
	return l, ok
}

func TestOverridesChangeDecisionsAndKeepState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		clock := newManualClock()
		ov := &mapOverrides{}
		l := newLimiter(ratelimit.WithClock(clock), ratelimit.WithOverrides(ov))
		rule := &ratelimit.Rule{Name: "ov", Limits: perPeriod(5, time.Minute)}
		ctx := context.Background()
		for range 3 {
			require.NoError(t, rule.Check(ctx, l, 1, ""))
		}

		ov.set("ov", ratelimit.Limit{Period: time.Minute, Threshold: 4})
		require.NoError(t, rule.Check(ctx, l, 1, ""), "4th of 4: the 3 calls before still count")
		var le *ratelimit.LimitError
		require.ErrorAs(t, rule.Check(ctx, l, 1, ""), &le)
		assert.Equal(t, int64(4), le.Limit.Threshold, "the error names the limit that applied")

		ov.set("ov") // back to the generated limit
		require.NoError(t, rule.Check(ctx, l, 1, ""))
		require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited)

		// A shorter period lets the calls made 30s ago leave the window.
		clock.Advance(30 * time.Second)
		require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited)
		ov.set("ov", ratelimit.Limit{Period: 20 * time.Second, Threshold: 5})
		require.NoError(t, rule.Check(ctx, l, 1, ""))

		other := &ratelimit.Rule{Name: "other", Limits: perPeriod(1, time.Minute)}
		require.NoError(t, other.Check(ctx, l, 1, ""))
		require.ErrorIs(t, other.Check(ctx, l, 1, ""), ratelimit.ErrLimited, "other names keep their limits")
	})
}

func TestOverridesAddALimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		ov := &mapOverrides{}
		l := newLimiter(ratelimit.WithClock(newManualClock()), ratelimit.WithOverrides(ov))
		rule := &ratelimit.Rule{Name: "add", Limits: perPeriod(10, time.Minute)}
		ov.set("add", ratelimit.Limit{Period: time.Minute, Threshold: 10}, ratelimit.Limit{Period: time.Hour, Threshold: 2})
		ctx := context.Background()
		require.NoError(t, rule.Check(ctx, l, 1, ""))
		require.NoError(t, rule.Check(ctx, l, 1, ""))
		var le *ratelimit.LimitError
		require.ErrorAs(t, rule.Check(ctx, l, 1, ""), &le)
		assert.Equal(t, time.Hour, le.Limit.Period)
	})
}

func TestUnusableOverridesAreIgnored(t *testing.T) {
	rule := &ratelimit.Rule{Name: "r", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5}}}
	other := &ratelimit.Rule{Name: "r", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5, Algorithm: "sliding_log"}}}
	fixed := &ratelimit.Rule{Name: "r", Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 5, Algorithm: "fixed_window"}}}
	cases := []struct {
		name string
		rule *ratelimit.Rule
		ov   []ratelimit.Limit
		want []ratelimit.Limit
	}{
		{"none", rule, nil, rule.Limits},
		{"valid", rule, []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}, []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}},
		{"zero threshold", rule, []ratelimit.Limit{{Period: time.Minute}}, rule.Limits},
		{"zero period", rule, []ratelimit.Limit{{Threshold: 3}}, rule.Limits},
		{"unknown algorithm", rule, []ratelimit.Limit{{Period: time.Minute, Threshold: 1, Algorithm: "gcra_x"}}, rule.Limits},
		{"another algorithm than the rule's", fixed, []ratelimit.Limit{{Period: time.Minute, Threshold: 1, Algorithm: ratelimit.SlidingLog}}, fixed.Limits},
		{"an added limit may use any", rule, []ratelimit.Limit{{Period: time.Minute, Threshold: 1}, {Period: time.Hour, Threshold: 9, Algorithm: ratelimit.SlidingLog}},
			[]ratelimit.Limit{{Period: time.Minute, Threshold: 1}, {Period: time.Hour, Threshold: 9, Algorithm: ratelimit.SlidingLog}}},
		{"algorithm taken from the rule", other, []ratelimit.Limit{{Period: time.Minute, Threshold: 1}},
			[]ratelimit.Limit{{Period: time.Minute, Threshold: 1, Algorithm: "sliding_log"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := overridesFunc(func(context.Context, string) ([]ratelimit.Limit, bool) { return c.ov, c.ov != nil })
			assert.Equal(t, c.want, c.rule.EffectiveLimits(context.Background(), ratelimit.NewMemory(ratelimit.WithOverrides(src)), ""))
		})
	}
}

func TestRedisOverrides(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	srv.Flush(t)
	c := rdb(t)
	const hash = "ratelimit:overrides"
	require.NoError(t, c.HSet(ctx, hash, "ro", "period=1m threshold=1", "bad", "period=1m").Err())
	ov := NewOverrides(c, hash, 20*time.Millisecond, OverridesLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { ov.Close() })
	err := ov.Refresh(ctx)
	require.Error(t, err, "the bad field is reported")
	assert.Contains(t, err.Error(), `ratelimit:overrides "bad": ratelimit: invalid limit: "period=1m": period and threshold are required`)
	assert.Equal(t, err, ov.Err())
	got, ok := ov.Lookup(ctx, "ro")
	require.True(t, ok)
	assert.Equal(t, []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}, got)
	_, ok = ov.Lookup(ctx, "bad")
	assert.False(t, ok, "a value that does not parse is skipped")

	for _, limiter := range []ratelimit.Limiter{
		New(c, ratelimit.WithClock(clock), ratelimit.WithOverrides(ov)),
		ratelimit.NewMemory(ratelimit.WithClock(clock), ratelimit.WithOverrides(ov)),
	} {
		rule := &ratelimit.Rule{Name: "ro", Limits: perPeriod(3, time.Minute)}
		require.NoError(t, rule.Check(ctx, limiter, 1, ""))
		require.ErrorIs(t, rule.Check(ctx, limiter, 1, ""), ratelimit.ErrLimited, "threshold 1 from the hash")
	}

	// An operator raises the threshold; a background refresh picks it up.
	require.NoError(t, c.HSet(ctx, hash, "ro", `{"period": "1m", "threshold": 2}`).Err())
	require.NoError(t, c.HDel(ctx, hash, "bad").Err())
	require.Eventually(t, func() bool {
		got, _ := ov.Lookup(ctx, "ro")
		return len(got) == 1 && got[0].Threshold == 2
	}, time.Minute, 5*time.Millisecond)
	require.Eventually(t, func() bool { return ov.Err() == nil }, time.Minute, 5*time.Millisecond)
	rule := &ratelimit.Rule{Name: "ro", Limits: perPeriod(3, time.Minute)}
	lim := New(c, ratelimit.WithClock(clock), ratelimit.WithOverrides(ov))
	require.NoError(t, rule.Check(ctx, lim, 1, ""), "the call before still counts: 2nd of 2")
	require.ErrorIs(t, rule.Check(ctx, lim, 1, ""), ratelimit.ErrLimited)

	// Deleting the field returns to the generated limits.
	require.NoError(t, c.Del(ctx, hash).Err())
	require.Eventually(t, func() bool {
		_, ok := ov.Lookup(ctx, "ro")
		return !ok
	}, time.Minute, 5*time.Millisecond)
	require.NoError(t, rule.Check(ctx, lim, 1, ""), "3rd of 3")
}

func TestRedisOverridesNeverWaitForRedis(t *testing.T) {
	ov := NewOverrides(failFastClient(t, stoppedAddr(t)), "h", time.Millisecond)
	t.Cleanup(func() { ov.Close() })
	_, ok := ov.Lookup(context.Background(), "x")
	assert.False(t, ok)
	require.Eventually(t, func() bool { return ov.Err() != nil }, time.Minute, 5*time.Millisecond)
	assert.ErrorIs(t, ov.Err(), ratelimit.ErrBackend)
	_, ok = ov.Lookup(context.Background(), "x")
	assert.False(t, ok)
}

// logRecords is a slog.Handler that keeps the records it is given.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

func (h *logRecords) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		if r.Level == slog.LevelWarn {
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "field" {
					out = append(out, a.Value.String())
				}
				return true
			})
		}
	}
	return out
}

// TestOverrideMistakesAreLoudAndSafe: a field that cannot be used (a typo
// in its value, a tier that is not set, a rule the service does not have)
// keeps its last good value, so no typo lifts a limit, and is logged once
// per value at Warn, counted and listed until it is fixed.
func TestOverrideMistakesAreLoudAndSafe(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	c := rdb(t)
	const hash = "ratelimit:loud"
	logs := &logRecords{}
	rule := &ratelimit.Rule{Name: "svc.Get", Limits: perPeriod(3, time.Minute)}
	ov := NewOverrides(c, hash, time.Hour, OverridesLogger(slog.New(logs)), OverridesRules(rule))
	t.Cleanup(func() { ov.Close() })
	<-ov.first
	threshold := func(key string) int64 {
		l := rule.EffectiveLimits(ctx, ratelimit.NewMemory(ratelimit.WithOverrides(ov)), key)
		return l[0].Threshold
	}
	set := func(kv ...string) {
		t.Helper()
		require.NoError(t, c.HSet(ctx, hash, kv).Err())
	}

	set("svc.Get|key=k", "period=1m threshold=1", "svc.Get|tier=gold", "period=1m threshold=9", "svc.Get|key=g", "tier=gold")
	require.NoError(t, ov.Refresh(ctx))
	require.Equal(t, []int64{1, 9, 3}, []int64{threshold("k"), threshold("g"), threshold("x")})

	// Typos: a misspelt name in k's value, a tier that is not set for g,
	// and a rule that does not exist.
	set("svc.Get|key=k", "period=1m treshold=1", "svc.Get|key=g", "tier=gld", "svc.Gte", "period=1m threshold=100")
	for range 3 {
		err := ov.Refresh(ctx)
		require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
		assert.Equal(t, []int64{1, 9, 3}, []int64{threshold("k"), threshold("g"), threshold("x")}, "the last good values stay")
	}
	var fields []string
	for _, p := range ov.Problems() {
		fields = append(fields, p.Field)
	}
	assert.Equal(t, []string{"svc.Get|key=g", "svc.Get|key=k", "svc.Gte"}, fields)
	assert.ElementsMatch(t, []string{"svc.Get|key=" + callkey.Redact("g"), "svc.Get|key=" + callkey.Redact("k"), "svc.Gte"}, logs.warnings(),
		"each logged once, for three reads, its key redacted")
	assert.Equal(t, uint64(3), ov.Rejected())

	// Another mistake in the same field is logged again; a fix clears it.
	set("svc.Get|key=k", "period=1m threshold=x")
	require.Error(t, ov.Refresh(ctx))
	assert.Len(t, logs.warnings(), 4)
	require.NoError(t, c.HDel(ctx, hash, "svc.Gte").Err())
	set("svc.Get|key=k", "period=1m threshold=2", "svc.Get|key=g", "tier=gold")
	require.NoError(t, ov.Refresh(ctx))
	assert.Empty(t, ov.Problems())
	assert.Equal(t, []int64{2, 9, 3}, []int64{threshold("k"), threshold("g"), threshold("x")})

	// A field with no good value yet is ignored, and says so.
	set("svc.Get|key=new", "period=1m")
	require.Error(t, ov.Refresh(ctx))
	assert.Equal(t, int64(3), threshold("new"))
}

// TestOverridesReadInTheBackground: a value the operator sets reaches the
// table without any call asking for it, within a refresh interval or two.
func TestOverridesReadInTheBackground(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	c := rdb(t)
	ov := NewOverrides(c, "ratelimit:bg", 20*time.Millisecond)
	t.Cleanup(func() { ov.Close() })
	require.NoError(t, c.HSet(ctx, "ratelimit:bg", "r", "period=1m threshold=4").Err())
	require.Eventually(t, func() bool {
		set := ov.table.Load()
		if set == nil {
			return false
		}
		l, ok := set.Lookup(ctx, "r")
		return ok && l[0].Threshold == 4
	}, 10*time.Second, time.Millisecond)
}

// TestOverridesExemptAndBlock: unlimited exempts a key (or a tier's keys)
// from every limit of the rule; block denies them, with a LimitError that
// says so, without asking the limiter; the hook sees the block.
func TestOverridesExemptAndBlock(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		var s ratelimit.StaticOverrides
		s.SetKey("eb", "vip", ratelimit.Limit{Algorithm: ratelimit.Unlimited})
		s.SetKey("eb", "mallory", ratelimit.Limit{Algorithm: ratelimit.Block})
		s.SetTier("eb", "banned", ratelimit.Limit{Algorithm: ratelimit.Block})
		s.SetKeyTier("eb", "eve", "banned")
		m := &limitmetrics.Metrics{}
		l := newLimiter(ratelimit.WithOverrides(&s), ratelimit.WithHook(m))
		rule := &ratelimit.Rule{Name: "eb", Limits: perPeriod(1, time.Minute)}
		for range 5 {
			require.NoError(t, rule.Check(ctx, l, 1, "vip"), "exempt")
		}
		require.NoError(t, rule.Check(ctx, l, 1, "other"))
		require.ErrorIs(t, rule.Check(ctx, l, 1, "other"), ratelimit.ErrLimited)
		for _, key := range []string{"mallory", "eve"} {
			err := rule.Check(ctx, l, 1, key)
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le, key)
			assert.Equal(t, ratelimit.Limit{Algorithm: ratelimit.Block, Period: time.Minute}, le.Limit)
			assert.Equal(t, time.Minute, le.RetryAfter)
			assert.Contains(t, err.Error(), "is blocked by an override")
		}
		shadow := &ratelimit.Rule{Name: "eb", Limits: perPeriod(1, time.Minute), Shadow: true}
		require.NoError(t, shadow.Check(ctx, l, 1, "mallory"), "a shadow rule never denies")
		assert.Equal(t, limitmetrics.Counters{Allowed: 1, Limited: 3, ShadowLimited: 1, NearLimit: 1}, m.Snapshot()["eb"])
	})
}

// overridesFunc adapts a function to ratelimit.Overrides.
type overridesFunc func(ctx context.Context, name string) ([]ratelimit.Limit, bool)

// Lookup calls f.
func (f overridesFunc) Lookup(ctx context.Context, name string) ([]ratelimit.Limit, bool) {
	return f(ctx, name)
}

// TestOverrideQualifierTyposAreLoudAndSafe: a field whose qualifier after
// '|' is neither key= nor tier= (a typo of either) was taken for the name
// of a rule that does not exist, even with OverridesRules: nothing in
// Problems, no log line. Each is now a problem, logged once (its key
// redacted), counted, and leaves the limits in force as they were.
func TestOverrideQualifierTyposAreLoudAndSafe(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	c := rdb(t)
	const hash = "ratelimit:qualifiers"
	logs := &logRecords{}
	rule := &ratelimit.Rule{Name: "svc.Get", Limits: perPeriod(3, time.Minute)}
	ov := NewOverrides(c, hash, time.Hour, OverridesLogger(slog.New(logs)), OverridesRules(rule))
	t.Cleanup(func() { ov.Close() })
	<-ov.first
	threshold := func(key string) int64 {
		return rule.EffectiveLimits(ctx, ratelimit.NewMemory(ratelimit.WithOverrides(ov)), key)[0].Threshold
	}
	require.NoError(t, c.HSet(ctx, hash, "svc.Get|tier=gold", "period=1m threshold=9", "svc.Get|key=abc", "tier=gold").Err())
	require.NoError(t, ov.Refresh(ctx))
	require.Equal(t, []int64{9, 3}, []int64{threshold("abc"), threshold("x")})

	typos := map[string]string{
		"svc.Get|tire=gold": "period=1m threshold=100",
		"svc.Get|kye=abc":   "period=1m threshold=100",
		"svc.Get|key:abc":   "period=1m threshold=100",
		"svc.Get|Key=abc":   "period=1m threshold=100",
	}
	for field, value := range typos {
		require.NoError(t, c.HSet(ctx, hash, field, value).Err())
	}
	for range 2 {
		err := ov.Refresh(ctx)
		require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
		assert.Equal(t, []int64{9, 3}, []int64{threshold("abc"), threshold("x")}, "the limits in force stay")
	}
	var fields []string
	for _, p := range ov.Problems() {
		fields = append(fields, p.Field)
		assert.ErrorContains(t, p, "did you mean", p.Field)
	}
	assert.Equal(t, []string{"svc.Get|Key=abc", "svc.Get|key:abc", "svc.Get|kye=abc", "svc.Get|tire=gold"}, fields)
	assert.Len(t, logs.warnings(), 4, "each logged once, for two reads")
	for _, w := range logs.warnings() {
		assert.NotContains(t, w, "abc", "a key in a mistyped field is redacted")
	}
	assert.Equal(t, uint64(4), ov.Rejected())
}

// TestKeyOverrideOfWrongLengthIsLoudAndSafe: limit i of a key's override
// replaces line i of a rule whose lines have their own keys, so an
// override with fewer limits than the rule has lines left the key's line
// as it was, silently. With OverridesRules such a field is a problem like
// a bad value, as is one whose algorithm differs from the line's.
func TestKeyOverrideOfWrongLengthIsLoudAndSafe(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	c := rdb(t)
	const hash = "ratelimit:keylength"
	logs := &logRecords{}
	rule := &ratelimit.Rule{Name: "svc.Put", Limits: []ratelimit.Limit{
		{Period: time.Minute, Threshold: 100}, {Period: time.Minute, Threshold: 5},
	}, KeyExprs: []string{"", "tenant"}}
	ov := NewOverrides(c, hash, time.Hour, OverridesLogger(slog.New(logs)), OverridesRules(rule))
	t.Cleanup(func() { ov.Close() })
	<-ov.first
	limits := func(tenant string) []int64 {
		l, _ := rule.Explain(ctx, ratelimit.NewMemory(ratelimit.WithOverrides(ov)), "", tenant)
		var out []int64
		for _, x := range l {
			out = append(out, x.Threshold)
		}
		return out
	}
	require.NoError(t, c.HSet(ctx, hash, "svc.Put|key=acme", "period=1m threshold=100; period=1m threshold=50").Err())
	require.NoError(t, ov.Refresh(ctx))
	require.Equal(t, []int64{100, 50}, limits("acme"))

	for _, value := range []string{
		"period=1m threshold=500", // one limit for two lines
		"period=1m threshold=100; period=1m threshold=50; period=1h threshold=900", // three
		"period=1m threshold=100; period=1m threshold=50 algorithm=gcra",           // another algorithm
	} {
		require.NoError(t, c.HSet(ctx, hash, "svc.Put|key=acme", value).Err())
		err := ov.Refresh(ctx)
		require.ErrorIs(t, err, ratelimit.ErrInvalidLimit, value)
		assert.Equal(t, []int64{100, 50}, limits("acme"), "the last good value stays: %s", value)
		require.Len(t, ov.Problems(), 1, value)
		assert.Equal(t, "svc.Put|key=acme", ov.Problems()[0].Field)
	}
	assert.Len(t, logs.warnings(), 3)
	assert.Equal(t, uint64(3), ov.Rejected())

	// A tier's limits are a key's: the same rule holds.
	require.NoError(t, c.HSet(ctx, hash, "svc.Put|key=acme", "tier=gold", "svc.Put|tier=gold", "period=1m threshold=7").Err())
	require.ErrorIs(t, ov.Refresh(ctx), ratelimit.ErrInvalidLimit)
	// unlimited and block apply to the whole call, whatever the lines.
	require.NoError(t, c.HSet(ctx, hash, "svc.Put|tier=gold", "unlimited").Err())
	require.NoError(t, ov.Refresh(ctx))
	assert.Empty(t, ov.Problems())
}
