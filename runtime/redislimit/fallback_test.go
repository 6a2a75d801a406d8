package redislimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
)

// sourceLog is a hook that keeps the source of every decision, would-be
// denials of shadow rules included, and counts failures.
type sourceLog struct {
	mu       sync.Mutex
	sources  []ratelimit.Source
	shadowed []ratelimit.Source
	failures int
}

func (h *sourceLog) Decided(_ context.Context, _ *ratelimit.Request, d ratelimit.Decision) {
	h.mu.Lock()
	h.sources = append(h.sources, d.Source)
	h.mu.Unlock()
}

func (h *sourceLog) ShadowLimited(_ context.Context, _ *ratelimit.Request, d ratelimit.Decision) {
	h.mu.Lock()
	h.shadowed = append(h.shadowed, d.Source)
	h.mu.Unlock()
}

func (h *sourceLog) Failed(context.Context, *ratelimit.Request, error) {
	h.mu.Lock()
	h.failures++
	h.mu.Unlock()
}

// decisions returns how many decisions the hook saw, would-be denials
// included.
func (h *sourceLog) decisions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sources) + len(h.shadowed)
}

// last returns the source of the latest admission or denial.
func (h *sourceLog) last() ratelimit.Source {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sources[len(h.sources)-1]
}

// checkSource checks one call of rule and returns whether it was admitted
// and what decided it; it fails the test unless the call was decided.
func checkSource(t *testing.T, rule *ratelimit.Rule, l ratelimit.Limiter, h *sourceLog, key string) (bool, ratelimit.Source) {
	t.Helper()
	before := h.decisions()
	err := rule.Check(context.Background(), l, 1, key)
	require.Equal(t, before+1, h.decisions(), "call on %q was not decided (err %v)", key, err)
	if err != nil {
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le, "a decided call fails only as denied")
		require.Positive(t, le.RetryAfter)
		return false, h.last()
	}
	return true, h.last()
}

// outageCase is a Redis outage and its end, seen from a limiter whose
// calls on keys live on the Redis that fails.
type outageCase struct {
	l        *Limiter
	log      *sourceLog
	metrics  *limitmetrics.Metrics
	down, up func(t *testing.T)
	// keys (at least four) live on the Redis that fails; live, if set, on
	// one that does not.
	keys []string
	live string
}

// run checks that calls of a FailLocal rule are decided by Redis before
// the outage, by the fallback during it (exactly what Redis said was left
// of each key: not unlimited, not zero), and by Redis again once it
// answers.
func (c outageCase) run(t *testing.T) {
	const threshold = 3
	rule := &ratelimit.Rule{Name: "fallback", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: threshold}}, OnError: ratelimit.FailLocal}
	ok, src := checkSource(t, rule, c.l, c.log, c.keys[0])
	require.True(t, ok)
	require.Equal(t, ratelimit.SourceBackend, src, "Redis decides while it is up")
	start := c.metrics.Snapshot()["fallback"]

	c.down(t)
	for j, key := range c.keys[:2] {
		admitted := 0
		for i := range 3 * threshold {
			ok, src := checkSource(t, rule, c.l, c.log, key)
			require.Equal(t, ratelimit.SourceFallback, src, "call %d on %q during the outage", i, key)
			if ok {
				admitted++
			}
		}
		// Redis admitted one call of the first key before the outage, and
		// told what was left: the fallback spends only that.
		assert.Equal(t, threshold-1+j, admitted, "the fallback admits exactly what Redis said was left of %q", key)
	}
	if c.live != "" {
		_, src := checkSource(t, rule, c.l, c.log, c.live)
		assert.Equal(t, ratelimit.SourceBackend, src, "a key on a Redis that is up is decided there")
	}
	m := c.metrics.Snapshot()["fallback"]
	assert.Equal(t, uint64(6*threshold), m.Fallback-start.Fallback)
	assert.Equal(t, uint64(4*threshold+1), m.Limited-start.Limited)
	assert.Equal(t, uint64(6*threshold), m.BackendErrors-start.BackendErrors, "every fallback decision follows a backend failure")

	c.up(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		before := c.log.decisions()
		err := rule.Check(context.Background(), c.l, 1, c.keys[2])
		if le := (*ratelimit.LimitError)(nil); errors.As(err, &le) && le.Source == ratelimit.SourceBusy && c.log.decisions() == before {
			time.Sleep(10 * time.Millisecond) // shed undecided while the fleet rejoins Redis: ask again
			continue
		}
		require.Equal(t, before+1, c.log.decisions(), "call on %q was not decided (err %v)", c.keys[2], err)
		if c.log.last() == ratelimit.SourceBackend {
			break
		}
		require.True(t, time.Now().Before(deadline), "Redis never decided again after the outage")
		time.Sleep(10 * time.Millisecond)
	}
	// Redis decides again, with its own state (a key the fallback did not
	// decide: what it admitted of the others was carried back).
	for i := range threshold + 1 {
		ok, src := checkSource(t, rule, c.l, c.log, c.keys[3])
		assert.Equal(t, i < threshold, ok, "call %d after the outage", i)
		assert.Equal(t, ratelimit.SourceBackend, src, "call %d after the outage", i)
	}
}

func TestFallbackDuringOutage(t *testing.T) {
	keys := []string{"a", "b", "c", "d"}
	t.Run("killed and restarted", func(t *testing.T) {
		s, err := redistest.Start()
		require.NoError(t, err)
		t.Cleanup(func() { s.Stop() })
		metrics, log := &limitmetrics.Metrics{}, &sourceLog{}
		l := New(failFastClient(t, s.Addr), ratelimit.WithHook(metrics, log), WithBreaker(2, 20*time.Millisecond, 200*time.Millisecond))
		addr := s.Addr
		outageCase{
			l: l, log: log, metrics: metrics, keys: keys,
			down: func(*testing.T) { s.Stop() },
			up: func(t *testing.T) {
				s, err = redistest.StartOn(addr)
				require.NoError(t, err)
			},
		}.run(t)
	})
	t.Run("stalled", func(t *testing.T) {
		s, err := redistest.Start()
		require.NoError(t, err)
		t.Cleanup(s.Stop)
		metrics, log := &limitmetrics.Metrics{}, &sourceLog{}
		l := New(failFastClient(t, s.Addr), ratelimit.WithHook(metrics, log), WithBreaker(2, 20*time.Millisecond, 200*time.Millisecond))
		admin := s.Client()
		t.Cleanup(func() { admin.Close() })
		down, up := stall(admin)
		outageCase{l: l, log: log, metrics: metrics, keys: keys, down: down, up: up}.run(t)
	})
}

// stall returns functions that make the server of admin hold every script
// call (CLIENT PAUSE WRITE, for a minute at most) and let them go on.
func stall(admin *redis.Client) (down, up func(t *testing.T)) {
	down = func(t *testing.T) {
		require.NoError(t, admin.Do(context.Background(), "CLIENT", "PAUSE", time.Minute.Milliseconds(), "WRITE").Err())
		t.Cleanup(func() { admin.ClientUnpause(context.Background()) })
	}
	up = func(t *testing.T) {
		require.NoError(t, admin.ClientUnpause(context.Background()).Err())
	}
	return down, up
}

// fallbackDuringStall stalls one master: calls whose keys it holds are
// decided by the fallback, the others by their masters, and by the stalled
// master again once it answers.
func (ct *clusterTest) fallbackDuringStall(t *testing.T) {
	ct.cluster.Flush(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:         ct.cluster.Addrs(),
		DialTimeout:   200 * time.Millisecond,
		ReadTimeout:   200 * time.Millisecond,
		DialerRetries: 1,
		MaxRetries:    -1,
		MaxRedirects:  1,
	})
	t.Cleanup(func() { c.Close() })
	metrics, log := &limitmetrics.Metrics{}, &sourceLog{}
	l := New(c, ratelimit.WithHook(metrics, log), WithBreaker(2, 20*time.Millisecond, 200*time.Millisecond))
	ctx := context.Background()
	victim := ct.cluster.Addrs()[0]
	var keys []string
	live := ""
	for i := 0; len(keys) < 4 || live == ""; i++ {
		require.Less(t, i, 10000)
		key := fmt.Sprint("k", i)
		m, err := c.MasterForKey(ctx, l.Key("fallback", key, 0, ratelimit.SlidingLog))
		require.NoError(t, err)
		switch {
		case m.Options().Addr != victim:
			live = key
		case len(keys) < 4:
			keys = append(keys, key)
		}
	}
	admin := redis.NewClient(&redis.Options{Addr: victim})
	t.Cleanup(func() { admin.Close() })
	down, up := stall(admin)
	outageCase{l: l, log: log, metrics: metrics, keys: keys, live: live, down: down, up: up}.run(t)
}

// downLimiter returns a Redis limiter of addr, where no server listens,
// whose breaker opened on the first call, with opts.
func downLimiter(t *testing.T, addr string, opts ...Option) *Limiter {
	l := New(failFastClient(t, addr), append(opts, WithBreaker(1, time.Hour, time.Hour))...)
	_, err := l.Allow(context.Background(), breakerReq)
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	require.True(t, l.CircuitOpen())
	return l
}

// TestFallbackAgreesWithTheTwin feeds the same random calls to a FailLocal
// rule on a Redis limiter whose Redis is down and to a memory limiter
// given each process's share of the limits, on one pinned clock, for every
// algorithm and limit set of TestBackendsAgree: the decisions are the
// twin's, from the fallback; a call whose cost is above a share fails with
// the backend's error.
func TestFallbackAgreesWithTheTwin(t *testing.T) {
	ctx := context.Background()
	addr := stoppedAddr(t)
	for _, processes := range []int{1, 3} {
		for _, set := range agreeSets() {
			t.Run(fmt.Sprintf("%d/%s", processes, set.name), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(processes), uint64(len(set.name))))
				clock := newManualClock()
				mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
				red := downLimiter(t, addr, ratelimit.WithClock(clock), WithFallbackProcesses(processes))
				admitted, denied := 0, 0
				for i := range 300 {
					limits := set.step(rng, clock, i, 300)
					req := set.request(rng, limits)
					got, err := decideFailingLocally(ctx, red, req)
					shared := req
					shared.Limits = make([]ratelimit.Limit, len(limits))
					for j, l := range limits {
						shared.Limits[j] = guard.Share(l, processes)
					}
					want, werr := mem.Allow(ctx, shared)
					if werr != nil {
						require.ErrorIs(t, werr, ratelimit.ErrInvalidLimit, "call %d", i)
						require.ErrorIs(t, err, ratelimit.ErrCircuitOpen, "call %d: cost %d above a share fails with the backend's error", i, req.Cost)
						require.NotErrorIs(t, err, ratelimit.ErrInvalidLimit)
						continue
					}
					require.NoError(t, err, "call %d", i)
					require.Equal(t, ratelimit.SourceFallback, got.Source)
					got.Source = ratelimit.SourceBackend
					require.Equal(t, want, got, "call %d at %s: %+v", i, clock.Now().Format(time.StampMicro), shared)
					if got.Allowed {
						admitted++
					} else {
						denied++
					}
				}
				require.NotZero(t, admitted)
				require.NotZero(t, denied, "the sequence should reach the limit")
			})
		}
	}
}

// TestFallbackShares runs a FailLocal rule with an override on a Redis
// limiter whose Redis is down, with each process's share.
func TestFallbackShares(t *testing.T) {
	ctx := context.Background()
	ov := overridesFunc(func(context.Context, string) ([]ratelimit.Limit, bool) {
		return []ratelimit.Limit{{Period: time.Hour, Threshold: 8}}, true
	})
	metrics, log := &limitmetrics.Metrics{}, &sourceLog{}
	l := downLimiter(t, stoppedAddr(t), WithFallbackProcesses(4), ratelimit.WithOverrides(ov), ratelimit.WithHook(metrics, log))
	rule := &ratelimit.Rule{Name: "share", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 100}}, OnError: ratelimit.FailLocal}
	admitted := 0
	for range 10 {
		ok, src := checkSource(t, rule, l, log, "k")
		require.Equal(t, ratelimit.SourceFallback, src)
		if ok {
			admitted++
		}
	}
	assert.Equal(t, 2, admitted, "a quarter of the override's threshold of 8")

	// Cost 3 fits the override's 8 but not a process's share of 2: no
	// share can ever admit it, so it fails closed.
	before := log.decisions()
	err := rule.Check(ctx, l, 3, "big")
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	require.ErrorIs(t, err, ratelimit.ErrCircuitOpen)
	require.NotErrorIs(t, err, ratelimit.ErrInvalidLimit)
	assert.Equal(t, before, log.decisions(), "no decision was made")
	require.NoError(t, rule.Check(ctx, l, 2, "big"), "a cost of the whole share is admitted")
}

// TestFallbackPolicy checks where FailLocal applies: from the rule or the
// limiter's default, and not to other errors or other policies.
func TestFallbackPolicy(t *testing.T) {
	ctx := context.Background()
	lim := []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}
	addr := stoppedAddr(t)
	t.Run("limiter default", func(t *testing.T) {
		l := downLimiter(t, addr, ratelimit.WithErrorPolicy(ratelimit.FailLocal))
		rule := &ratelimit.Rule{Name: "default", Limits: lim}
		require.NoError(t, rule.Check(ctx, l, 1, ""))
		require.ErrorIs(t, rule.Check(ctx, l, 1, ""), ratelimit.ErrLimited, "the fallback denies")
		open := &ratelimit.Rule{Name: "default", Limits: lim, OnError: ratelimit.FailOpen}
		require.NoError(t, open.Check(ctx, l, 1, ""), "a rule's own policy wins")
		closed := &ratelimit.Rule{Name: "default", Limits: lim, OnError: ratelimit.FailClosed}
		require.ErrorIs(t, closed.Check(ctx, l, 1, ""), ratelimit.ErrCircuitOpen)
	})
	t.Run("invalid and cancelled calls", func(t *testing.T) {
		l := downLimiter(t, addr)
		rule := &ratelimit.Rule{Name: "invalid", Limits: lim, OnError: ratelimit.FailLocal}
		require.ErrorIs(t, rule.Check(ctx, l, 2, ""), ratelimit.ErrInvalidLimit)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := rule.Check(cctx, l, 1, "")
		require.ErrorIs(t, err, context.Canceled)
		require.NoError(t, rule.Check(ctx, l, 1, ""), "a cancelled call charged nothing")
	})
	t.Run("limiter without a fallback", func(t *testing.T) {
		rule := &ratelimit.Rule{Name: "nofallback", Limits: lim, OnError: ratelimit.FailLocal}
		err := rule.Check(ctx, failingLimiter{}, 1, "")
		require.ErrorIs(t, err, ratelimit.ErrBackend, "FailLocal without a fallback fails closed")
		mem := ratelimit.NewMemory(ratelimit.WithErrorPolicy(ratelimit.FailLocal))
		require.NoError(t, rule.Check(ctx, mem, 1, ""), "the memory limiter decides itself")
		require.ErrorIs(t, rule.Check(ctx, mem, 1, ""), ratelimit.ErrLimited)
	})
}

// failingLimiter is a Limiter of the caller's own whose backend is down.
type failingLimiter struct{}

func (failingLimiter) Allow(_ context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, &ratelimit.BackendError{Name: req.Name, Err: errors.New("down")}
}

func (f failingLimiter) Do(_ context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.Unsupported(f, op.Kind)
}

func (failingLimiter) Abilities() ratelimit.Abilities { return ratelimit.Abilities{} }

// TestFallbackShadowAndWait checks a shadow rule and a waiting rule on the
// fallback: the shadow rule reports would-be denials and never denies, the
// waiting call waits for the fallback's RetryAfter and is admitted.
func TestFallbackShadowAndWait(t *testing.T) {
	ctx := context.Background()
	metrics, log := &limitmetrics.Metrics{}, &sourceLog{}
	l := downLimiter(t, stoppedAddr(t), ratelimit.WithHook(metrics, log))

	shadow := &ratelimit.Rule{Name: "shadow", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 2}}, OnError: ratelimit.FailLocal, Shadow: true}
	for range 5 {
		require.NoError(t, shadow.Check(ctx, l, 1, ""))
	}
	m := metrics.Snapshot()["shadow"]
	assert.Equal(t, limitmetrics.Counters{Allowed: 2, ShadowLimited: 3, BackendErrors: 5, NearLimit: 1, Fallback: 5}, m)
	assert.Equal(t, []ratelimit.Source{ratelimit.SourceFallback, ratelimit.SourceFallback, ratelimit.SourceFallback}, log.shadowed)

	wait := &ratelimit.Rule{Name: "wait", Limits: []ratelimit.Limit{{Period: 50 * time.Millisecond, Threshold: 1}}, OnError: ratelimit.FailLocal, Wait: time.Minute}
	require.NoError(t, wait.Check(ctx, l, 1, ""))
	require.NoError(t, wait.Check(ctx, l, 1, ""), "the second call waits for the fallback to admit it")
	m = metrics.Snapshot()["wait"]
	assert.Equal(t, uint64(2), m.Allowed)
	assert.Positive(t, m.Limited)
	assert.Equal(t, m.Allowed+m.Limited, m.Fallback, "every decision came from the fallback")
}

// TestSlogHookNamesTheFallback: decisions of the fallback are logged with
// their source, those of Redis without.
func TestSlogHookNamesTheFallback(t *testing.T) {
	var buf bytes.Buffer
	l := downLimiter(t, stoppedAddr(t), ratelimit.WithClock(newManualClock()), ratelimit.WithHook(ratelimit.NewSlogHook(newTextLogger(&buf, slog.LevelDebug))))
	buf.Reset()
	ctx := context.Background()
	rule := &ratelimit.Rule{Name: "svc.Get", Limits: perPeriod(1, time.Minute), OnError: ratelimit.FailLocal}
	require.NoError(t, rule.Check(ctx, l, 1, "u1"))
	require.ErrorIs(t, rule.Check(ctx, l, 1, "u1"), ratelimit.ErrLimited)
	var decisions []string
	for _, line := range logLines(&buf) {
		if !strings.Contains(line, "backend failure") {
			decisions = append(decisions, line)
		}
	}
	assert.Equal(t, []string{
		`level=DEBUG msg="ratelimit: admitted" name=svc.Get key=sha256:bb82030dbc2b cost=1 limit="1/1m0s (sliding_log)" remaining=0 reset_after=1m0s source=fallback`,
		`level=WARN msg="ratelimit: limited" name=svc.Get key=sha256:bb82030dbc2b cost=1 limit="1/1m0s (sliding_log)" remaining=0 retry_after=1m0s reset_after=1m0s source=fallback`,
	}, decisions)
}

// BenchmarkFallbackCall measures a FailLocal call while the breaker is
// open: what each call costs while Redis is down, decided in process.
// Compare BenchmarkBreakerOpenCall (FailOpen) and ratelimit's
// BenchmarkRuleCheckMemory (./runtime/), run in the same go test command.
func BenchmarkFallbackCall(b *testing.B) {
	l := New(failFastClient(b, stoppedAddr(b)), WithBreaker(1, time.Hour, time.Hour))
	ctx := context.Background()
	_, _ = l.Allow(ctx, breakerReq)
	if !l.CircuitOpen() {
		b.Fatal("breaker did not open")
	}
	rule := &ratelimit.Rule{Name: breakerReq.Name, Limits: []ratelimit.Limit{{Period: time.Second, Threshold: 1 << 40}}, OnError: ratelimit.FailLocal}
	b.ReportAllocs()
	for b.Loop() {
		if err := rule.Check(ctx, l, 1, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// decideFailingLocally decides req as Rule.Check does under FailLocal: by
// Redis, or when Redis fails by the local fallback; the backend's error
// when neither can.
func decideFailingLocally(ctx context.Context, red *Limiter, req ratelimit.Request) (ratelimit.Decision, error) {
	d, err := red.Allow(ctx, req)
	if err == nil || !errors.Is(err, ratelimit.ErrBackend) {
		return d, err
	}
	if d, _, lerr := red.AllowLocal(ctx, req); lerr == nil {
		return d, nil
	}
	return ratelimit.Decision{}, err
}
