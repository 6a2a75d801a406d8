package ratelimit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// logBuffer collects the records of a slog.TextHandler, without their
// time; tests read it while others write it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the records logged at level or above.
func (b *logBuffer) lines(level slog.Level) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if l == "" {
			continue
		}
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(strings.TrimPrefix(strings.Fields(l)[0], "level="))); err == nil && lv >= level {
			out = append(out, l)
		}
	}
	return out
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newTestSlogHook returns a hook that logs at Debug and above to buf,
// reading the time from clock.
func newTestSlogHook(buf *logBuffer, clock *manualClock) *SlogHook {
	h := NewSlogHook(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	})))
	setClock(h, clock)
	return h
}

func setClock(h *SlogHook, clock *manualClock) {
	h.now, h.epoch = clock.Now, clock.Now()
}

// apiKey is the key of the abusive client: it must be logged nowhere.
const apiKey = "sk_live_4f9a2c7e1b"

func digestOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

// TestSlogHookAbusiveClient is the acceptance of issue 18: one client
// calling far over its limit for 40 s (4,480 calls, as in the issue)
// writes one line above Debug, without its key, and one more when it
// has stopped; every call is still at Debug.
func TestSlogHookAbusiveClient(t *testing.T) {
	for _, limit := range []Limit{
		{Period: time.Minute, Threshold: 100},                               // denied from the 101st call on
		{Period: time.Second, Threshold: 10, Algorithm: TokenBucket},        // admitted 10 times a second throughout
		{Period: 10 * time.Second, Threshold: 50, Algorithm: SlidingWindow}, // admitted at each window
		{Period: time.Second, Threshold: 5, Burst: 20, Algorithm: GCRA},     // admitted 5 times a second
	} {
		t.Run(string(limit.Algorithm), func(t *testing.T) {
			var buf logBuffer
			clock := newManualClock()
			hook := newTestSlogHook(&buf, clock)
			l := NewMemory(WithClock(clock), WithHook(hook))
			rule := &Rule{Name: "svc.API.Search", Limits: []Limit{limit}}
			ctx := context.Background()
			var allowed, denied int
			for range 40 * 112 {
				if err := rule.Check(ctx, l, 1, apiKey); err == nil {
					allowed++
				} else {
					require.ErrorIs(t, err, ErrLimited)
					denied++
				}
				clock.Advance(time.Second / 112)
			}
			require.Greater(t, denied, 4000)
			lines := buf.lines(slog.LevelInfo)
			require.Len(t, lines, 1, strings.Join(lines, "\n"))
			assert.Contains(t, lines[0], `level=WARN msg="ratelimit: limited" name=svc.API.Search key=`+digestOf(apiKey)+` cost=1 limit="`+limit.String()+`"`)
			assert.Contains(t, lines[0], "retry_after=")
			assert.Len(t, buf.lines(slog.LevelDebug), 40*112, "every call at Debug")
			assert.NotContains(t, buf.String(), apiKey)

			// It stops; its next call, two minutes on, is admitted and ends
			// the episode.
			clock.Advance(2 * time.Minute)
			require.NoError(t, rule.Check(ctx, l, 1, apiKey))
			lines = buf.lines(slog.LevelInfo)
			require.Len(t, lines, 2, strings.Join(lines, "\n"))
			assert.Regexp(t, `^level=INFO msg="ratelimit: no longer limited" name=svc.API.Search key=`+digestOf(apiKey)+
				fmt.Sprintf(` denied=%d admitted=\d+ for=39\.\d+s$`, denied), lines[1])
		})
	}
}

// TestSlogHookEpisodes: a denial episode is logged when it begins, every
// 5 minutes while it lasts (not for a cache's repeats) and when it ends;
// a pair denied again after a quiet minute begins another.
func TestSlogHookEpisodes(t *testing.T) {
	var buf logBuffer
	clock := newManualClock()
	h := newTestSlogHook(&buf, clock)
	ctx := context.Background()
	req := &Request{Name: "n", Key: "k", Limits: []Limit{{Period: time.Minute, Threshold: 1}}}
	deny := Decision{RetryAfter: time.Second}
	cached := Decision{RetryAfter: time.Second, Source: SourceCache}

	h.Decided(ctx, req, Decision{Allowed: true})
	h.Decided(ctx, req, deny)
	for i := range 12 * 60 { // 12 minutes, a denial a second, mostly cached
		clock.Advance(time.Second)
		if (i+1)%30 == 0 {
			h.Decided(ctx, req, deny)
		} else {
			h.Decided(ctx, req, cached)
		}
	}
	h.Decided(ctx, req, Decision{Allowed: true}) // within the minute: the episode goes on
	clock.Advance(time.Minute)
	h.Decided(ctx, req, deny) // a minute without a denial: another episode
	clock.Advance(time.Minute)
	h.Decided(ctx, req, Decision{Allowed: true})
	h.Decided(ctx, req, Decision{Allowed: true})

	lines := buf.lines(slog.LevelInfo)
	key := digestOf("k")
	want := []string{
		`level=WARN msg="ratelimit: limited" name=n key=` + key + ` cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1s reset_after=0s`,
		`level=INFO msg="ratelimit: still limited" name=n key=` + key + ` cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1s reset_after=0s denied=301 admitted=0 for=5m0s`,
		`level=INFO msg="ratelimit: still limited" name=n key=` + key + ` cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1s reset_after=0s denied=601 admitted=0 for=10m0s`,
		`level=INFO msg="ratelimit: no longer limited" name=n key=` + key + ` denied=721 admitted=1 for=12m0s`,
		`level=WARN msg="ratelimit: limited" name=n key=` + key + ` cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1s reset_after=0s`,
		`level=INFO msg="ratelimit: no longer limited" name=n key=` + key + ` denied=1 admitted=0 for=0s`,
	}
	require.Equal(t, want, lines)
	assert.Zero(t, h.active.Load())
}

// TestSlogHookCacheRepeatsStayDebug: a deny cache's repeats never log
// above Debug, even when the hook has no episode for their pair.
func TestSlogHookCacheRepeatsStayDebug(t *testing.T) {
	var buf logBuffer
	h := newTestSlogHook(&buf, newManualClock())
	req := &Request{Name: "n", Key: "k", Limits: []Limit{{Period: time.Minute, Threshold: 1}}}
	for range 100 {
		h.Decided(context.Background(), req, Decision{RetryAfter: time.Second, Source: SourceCache})
	}
	assert.Empty(t, buf.lines(slog.LevelInfo))
	assert.Len(t, buf.lines(slog.LevelDebug), 100)
	assert.Contains(t, buf.lines(slog.LevelDebug)[0], "source=cache")
}

// TestSlogHookShadowEpisodes: would-be denials of shadow rules are
// episodes too, logged at Info.
func TestSlogHookShadowEpisodes(t *testing.T) {
	var buf logBuffer
	clock := newManualClock()
	h := newTestSlogHook(&buf, clock)
	l := NewMemory(WithClock(clock), WithHook(h))
	rule := &Rule{Name: "beta", Limits: []Limit{{Period: time.Minute, Threshold: 1}}, Shadow: true}
	for range 1000 {
		require.NoError(t, rule.Check(context.Background(), l, 1, ""))
	}
	clock.Advance(2 * time.Minute)
	require.NoError(t, rule.Check(context.Background(), l, 1, ""))
	assert.Equal(t, []string{
		`level=INFO msg="ratelimit: shadow limited" name=beta cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1m0s reset_after=1m0s`,
		`level=INFO msg="ratelimit: no longer shadow limited" name=beta denied=999 admitted=0 for=0s`,
	}, buf.lines(slog.LevelInfo))
}

// TestSlogHookRedactsKeys: keys are logged as their digests, that of a
// long key being the one its stand-in ends with; WithRawKeys logs them.
func TestSlogHookRedactsKeys(t *testing.T) {
	long := strings.Repeat("Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.", 10)
	standIn := callkey.Bound(long)
	require.True(t, callkey.IsStandIn(standIn))
	for _, c := range []struct{ key, want string }{
		{"ada", digestOf("ada")},
		{"", ""},
		{"a:b{c}", digestOf("a:b{c}")},
		{standIn, digestOf(long)},
	} {
		var buf logBuffer
		h := newTestSlogHook(&buf, newManualClock())
		req := &Request{Name: "n", Key: c.key, Limits: []Limit{{Period: time.Minute, Threshold: 1}}}
		h.Decided(context.Background(), req, Decision{Allowed: true})
		h.Decided(context.Background(), req, Decision{})
		h.Failed(context.Background(), req, errors.New("boom"))
		lines := buf.lines(slog.LevelDebug)
		require.Len(t, lines, 3)
		for _, line := range lines {
			if c.key == "" {
				assert.NotContains(t, line, "key=")
				continue
			}
			assert.Contains(t, line, " key="+c.want+" ")
			assert.NotContains(t, line, c.key)
		}

		buf = logBuffer{}
		raw := newTestSlogHook(&buf, newManualClock()).WithRawKeys()
		raw.Decided(context.Background(), req, Decision{})
		if c.key != "" {
			assert.Contains(t, buf.String(), c.key)
		}
	}
	// The digest is the one an operator computes with sha256sum.
	assert.Equal(t, "sha256:fdee430d40bd", callkey.Redact("ada"))
}

// TestSlogHookConcurrentDenials: many goroutines denied at once for a few
// keys write one line per key.
func TestSlogHookConcurrentDenials(t *testing.T) {
	var buf logBuffer
	clock := newManualClock()
	h := newTestSlogHook(&buf, clock)
	const goroutines, calls, keys = 64, 500, 5
	limits := []Limit{{Period: time.Minute, Threshold: 1}}
	for k := range keys { // so that every admission below falls in an episode
		h.Decided(context.Background(), &Request{Name: "n", Key: fmt.Sprint("k", k), Limits: limits}, Decision{RetryAfter: time.Second})
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				req := &Request{Name: "n", Key: fmt.Sprint("k", (g+i)%keys), Limits: limits}
				if i%10 == 0 {
					h.Decided(context.Background(), req, Decision{Allowed: true})
				} else {
					h.Decided(context.Background(), req, Decision{RetryAfter: time.Second})
				}
				if g == 0 && i%100 == 0 {
					clock.Advance(time.Second) // never a quiet minute
				}
			}
		})
	}
	wg.Wait()
	lines := buf.lines(slog.LevelInfo)
	require.Len(t, lines, keys, strings.Join(lines, "\n"))
	for k := range keys {
		assert.Contains(t, strings.Join(lines, "\n"), "key="+digestOf(fmt.Sprint("k", k))+" ")
	}
	var denied, admitted int64
	for i := range h.slots {
		if e := h.slots[i].Load(); e != nil {
			denied += e.denied.Load()
			admitted += e.admitted.Load()
		}
	}
	assert.Equal(t, int64(keys+goroutines*calls*9/10), denied)
	assert.Equal(t, int64(goroutines*calls/10), admitted)
	assert.Equal(t, int64(keys), h.active.Load())
}

// TestSlogHookBoundsManyKeys: denials of ever new keys (a client rotating
// keys, or a crowd) keep the hook's memory fixed and log at most 100
// beginnings a minute; the next line logged counts the others.
func TestSlogHookBoundsManyKeys(t *testing.T) {
	var buf logBuffer
	clock := newManualClock()
	h := newTestSlogHook(&buf, clock)
	const keys = 100_000
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < keys; i += 8 {
				req := &Request{Name: "n", Key: fmt.Sprint("client-", i), Limits: []Limit{{Period: time.Minute, Threshold: 1}}}
				h.Decided(context.Background(), req, Decision{RetryAfter: time.Second})
			}
		})
	}
	wg.Wait()
	assert.Len(t, buf.lines(slog.LevelInfo), maxStarts)
	assert.Len(t, buf.lines(slog.LevelDebug), keys)
	held := 0
	for i := range h.slots {
		if h.slots[i].Load() != nil {
			held++
		}
	}
	assert.LessOrEqual(t, held, episodeSets*episodeWays)
	assert.Equal(t, int64(held), h.active.Load())

	clock.Advance(budgetWindow)
	h.Decided(context.Background(), &Request{Name: "n", Key: "late"}, Decision{})
	lines := buf.lines(slog.LevelInfo)
	require.Len(t, lines, maxStarts+1)
	assert.Contains(t, lines[maxStarts], fmt.Sprintf(" unlogged=%d", keys-maxStarts))
}

// TestSlogHookBoundsFailures: failures before a breaker opens are logged
// at Error at most 10 a minute, those an open breaker refuses at Debug.
func TestSlogHookBoundsFailures(t *testing.T) {
	var buf logBuffer
	clock := newManualClock()
	h := newTestSlogHook(&buf, clock)
	req := &Request{Name: "n", Key: "k"}
	boom := &BackendError{Name: "n", Err: errors.New("connection refused")}
	open := &BackendError{Name: "n", Err: ErrCircuitOpen}
	for range 50 {
		h.Failed(context.Background(), req, boom)
		h.Failed(context.Background(), req, open)
	}
	assert.Len(t, buf.lines(slog.LevelError), maxFailures)
	assert.Len(t, buf.lines(slog.LevelDebug), 100)
	clock.Advance(budgetWindow)
	h.Failed(context.Background(), req, boom)
	lines := buf.lines(slog.LevelError)
	require.Len(t, lines, maxFailures+1)
	assert.Contains(t, lines[maxFailures], " unlogged=40")
}

// TestSlogHookConcurrentBeginnings: goroutines that begin the episode of
// one pair at once write one line for it.
func TestSlogHookConcurrentBeginnings(t *testing.T) {
	var buf logBuffer
	h := newTestSlogHook(&buf, newManualClock())
	const goroutines, keys = 32, maxStarts
	limits := []Limit{{Period: time.Minute, Threshold: 1}}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for i := range keys {
				req := &Request{Name: "n", Key: fmt.Sprint("k", (g+i)%keys), Limits: limits}
				h.Decided(context.Background(), req, Decision{RetryAfter: time.Second})
			}
		})
	}
	close(start)
	wg.Wait()
	lines := buf.lines(slog.LevelInfo)
	assert.Len(t, lines, keys)
	assert.Equal(t, int64(keys), h.active.Load())
	assert.Len(t, buf.lines(slog.LevelDebug), goroutines*keys)
}

// BenchmarkSlogHook measures what the hook costs a call with the logger at
// Info: a denial that repeats one of an episode going on, and an
// admission while some episode goes on (of its pair, and of another).
func BenchmarkSlogHook(b *testing.B) {
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx := context.Background()
	req := &Request{Name: "svc.API.Search", Key: apiKey, Limits: []Limit{{Period: time.Minute, Threshold: 100}}}
	other := &Request{Name: "svc.API.Search", Key: "someone-else", Limits: req.Limits}
	for _, c := range []struct {
		name string
		req  *Request
		d    Decision
	}{
		{"denial", req, Decision{RetryAfter: time.Second}},
		{"cached-denial", req, Decision{RetryAfter: time.Second, Source: SourceCache}},
		{"admission-in-episode", req, Decision{Allowed: true, Remaining: 50}},
		{"admission-other", other, Decision{Allowed: true, Remaining: 50}},
		{"admission-no-episode", nil, Decision{Allowed: true, Remaining: 50}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := NewSlogHook(logger)
			if c.req == nil {
				c.req = other
			} else {
				h.Decided(ctx, req, Decision{RetryAfter: time.Second}) // begins an episode
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h.Decided(ctx, c.req, c.d)
				}
			})
		})
	}
}

// TestSlogHookBoundsFlappingBreakers: a breaker that opens and closes again
// and again is logged at most 5 times a minute per node; the closings of
// openings left at Debug stay at Debug.
func TestSlogHookBoundsFlappingBreakers(t *testing.T) {
	var buf logBuffer
	clock := newManualClock()
	h := newTestSlogHook(&buf, clock)
	for range 20 {
		h.BreakerOpened("10.0.0.1:6379", errors.New("i/o timeout"))
		h.BreakerClosed("10.0.0.1:6379", 150*time.Millisecond)
	}
	h.BreakerOpened("10.0.0.2:6379", errors.New("i/o timeout"))
	assert.Len(t, buf.lines(slog.LevelWarn), maxOpenings+1)
	assert.Len(t, buf.lines(slog.LevelInfo), 2*maxOpenings+1)
	assert.Len(t, buf.lines(slog.LevelDebug), 41)
	clock.Advance(budgetWindow)
	h.BreakerOpened("10.0.0.1:6379", errors.New("i/o timeout"))
	lines := buf.lines(slog.LevelWarn)
	require.Len(t, lines, maxOpenings+2)
	assert.Equal(t, `level=WARN msg="ratelimit: circuit open" node=10.0.0.1:6379 error="i/o timeout" unlogged=15`, lines[len(lines)-1])
}
