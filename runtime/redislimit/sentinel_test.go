package redislimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestSentinelFailover runs the Redis limiter on a failover client of a
// primary, a replica and three redis-sentinels while goroutines call it,
// and fails the primary over: by a crash (SIGKILL), on request (SENTINEL
// FAILOVER), and on request with writes paused on the primary first (the
// way to fail over without losing charges). Each subtest starts a
// deployment of its own.
func TestSentinelFailover(t *testing.T) {
	t.Run("Kill", func(t *testing.T) {
		sentinelFailover(t, false, func(ctx context.Context, d *redistest.Sentinel, _ *redis.Client) (string, error) {
			return d.KillPrimary(ctx)
		})
	})
	t.Run("SentinelFailover", func(t *testing.T) {
		sentinelFailover(t, false, func(ctx context.Context, d *redistest.Sentinel, _ *redis.Client) (string, error) {
			return d.Failover(ctx)
		})
	})
	t.Run("WritesPaused", func(t *testing.T) {
		sentinelFailover(t, true, func(ctx context.Context, d *redistest.Sentinel, primary *redis.Client) (string, error) {
			// Longer than the failover takes: the clients leave the old
			// primary before it writes again.
			if err := primary.Do(ctx, "CLIENT", "PAUSE", time.Minute.Milliseconds(), "WRITE").Err(); err != nil {
				return "", err
			}
			// No charge is made from here on; the replica has every one.
			if n, err := primary.Wait(ctx, 1, time.Minute).Result(); err != nil || n != 1 {
				return "", fmt.Errorf("WAIT: %d replicas acknowledged (%v)", n, err)
			}
			return d.Failover(ctx)
		})
	})
}

// The rules the goroutines of sentinelFailover call, in turn.
const (
	// ruleCounted (FailLocal) never denies: its count on the new primary,
	// against the admissions Redis made, tells the charges lost.
	ruleCounted = iota
	// ruleCapped (FailLocal) is at its limit before the failover.
	ruleCapped
	ruleOpen   // FailOpen
	ruleClosed // FailClosed
	numRules
)

// cappedThreshold is the limit of ruleCapped.
const cappedThreshold = 100

// failoverOutcome is how a call of sentinelFailover ended.
type failoverOutcome uint8

const (
	outBackend  failoverOutcome = iota // decided by Redis
	outCache                           // a denial repeated by the deny cache
	outFallback                        // Redis failed; the local fallback decided (FailLocal)
	outPassed                          // Redis failed; the call went ahead undecided (FailOpen)
	outFailed                          // Redis failed; the call failed (FailClosed)
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"backend", "cache", "fallback", "passed", "failed"}

// failoverCall is one call of sentinelFailover, which the hook fills in
// through the call's context.
type failoverCall struct {
	rule       int
	start, end time.Time
	err        error
	// Set by the hook.
	decided bool
	source  ratelimit.Source
	allowed bool
	failed  bool
	// unanswered: Redis failed the call without a reply, after it was
	// sent: Redis may have run its script (see mayHaveRun).
	unanswered bool
}

func (c *failoverCall) outcome() failoverOutcome {
	switch {
	case c.decided && c.source == ratelimit.SourceFallback:
		return outFallback
	case c.decided && c.source == ratelimit.SourceCache:
		return outCache
	case c.decided && !c.failed:
		return outBackend
	case c.err == nil:
		return outPassed
	}
	return outFailed
}

type failoverCallKey struct{}

// failoverHook records each call's outcome in the failoverCall of its
// context, and the breaker's changes.
type failoverHook struct {
	mu      sync.Mutex
	opened  []time.Time
	closed  []time.Duration
	openErr []error
}

func (h *failoverHook) Decided(ctx context.Context, _ *ratelimit.Request, d ratelimit.Decision) {
	if c, ok := ctx.Value(failoverCallKey{}).(*failoverCall); ok {
		c.decided, c.source, c.allowed = true, d.Source, d.Allowed
	}
}

func (h *failoverHook) Failed(ctx context.Context, _ *ratelimit.Request, err error) {
	if c, ok := ctx.Value(failoverCallKey{}).(*failoverCall); ok {
		c.failed, c.unanswered = true, mayHaveRun(err)
	}
}

func (h *failoverHook) BreakerOpened(_ string, err error) {
	h.mu.Lock()
	h.opened = append(h.opened, time.Now())
	h.openErr = append(h.openErr, err)
	h.mu.Unlock()
}

func (h *failoverHook) BreakerClosed(_ string, open time.Duration) {
	h.mu.Lock()
	h.closed = append(h.closed, open)
	h.mu.Unlock()
}

// dialLog records when the failover client first dialled each address.
type dialLog struct {
	mu    sync.Mutex
	first map[string]time.Time
}

func (dl *dialLog) dialer(timeout time.Duration) func(context.Context, string, string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		dl.mu.Lock()
		if _, ok := dl.first[addr]; !ok {
			dl.first[addr] = time.Now()
		}
		dl.mu.Unlock()
		return d.DialContext(ctx, network, addr)
	}
}

func (dl *dialLog) firstDial(addr string) (time.Time, bool) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	at, ok := dl.first[addr]
	return at, ok
}

// sentinelFailover starts a primary, a replica and three sentinels, and
// has eight goroutines call four rules (FailLocal, FailLocal at its
// limit, FailOpen, FailClosed) through a limiter on a failover client
// built with FailoverOptions, while failover fails the primary over. It
// checks, by counting calls rather than timing them:
//
//   - nothing panics, and a call fails only as its rule's policy says: a
//     FailClosed call with a *ratelimit.BackendError, a FailOpen call goes
//     ahead, a FailLocal call is decided by the fallback;
//   - calls fail (or fall back) only around the failover: no call that
//     ended before it began, and no call that started after the limiter's
//     first decision on the new primary;
//   - Redis decides again, on the new primary, within a generous bound;
//   - the rule at its limit was admitted by Redis exactly its limit (its
//     charges were replicated before the failover), and by the fallback
//     at most its limit more;
//   - charges lost to asynchronous replication (calls the old primary
//     admitted that the new one does not count) come only from calls that
//     ended after the last point the replica was known to have caught up,
//     and with writesPaused (writes paused on the primary, and the replica
//     caught up, before the failover) none is lost.
//
// It logs how long the limiter took to decide on the new primary, the
// outcomes, and the charges lost.
func sentinelFailover(t *testing.T, writesPaused bool, failover func(ctx context.Context, d *redistest.Sentinel, primary *redis.Client) (string, error)) {
	d, err := redistest.StartSentinel(1, 3)
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	t.Cleanup(func() { // before Stop removes them
		if t.Failed() {
			t.Log(d.Logs())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	oldPrimary, err := d.Primary(ctx)
	require.NoError(t, err)
	admin := adminClient(t, oldPrimary)

	dials := &dialLog{first: map[string]time.Time{}}
	opts := FailoverOptions(d.FailoverOptions())
	opts.Dialer = dials.dialer(opts.DialTimeout)
	client := redis.NewFailoverClient(opts)
	t.Cleanup(func() { client.Close() })
	hook := &failoverHook{}
	l := New(client, ratelimit.WithHook(hook))

	huge := int64(1) << 40
	rules := [numRules]*ratelimit.Rule{
		ruleCounted: {Name: "sentinel.counted", OnError: ratelimit.FailLocal,
			Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: huge, Algorithm: ratelimit.SlidingLog}}},
		ruleCapped: {Name: "sentinel.capped", OnError: ratelimit.FailLocal,
			Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: cappedThreshold, Algorithm: ratelimit.SlidingLog}}},
		ruleOpen: {Name: "sentinel.open", OnError: ratelimit.FailOpen,
			Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: huge, Algorithm: ratelimit.GCRA}}},
		ruleClosed: {Name: "sentinel.closed", OnError: ratelimit.FailClosed,
			Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: huge, Algorithm: ratelimit.TokenBucket}}},
	}

	// What the goroutines tell the test as they go.
	var (
		decided    [numRules]atomic.Int64 // calls decided by Redis (or its deny cache)
		cappedDeny atomic.Int64           // denials of ruleCapped by Redis
		newSince   atomic.Int64           // UnixNano of the first dial to the new primary; 0 before
		decidedNew [numRules]atomic.Int64 // calls decided by Redis that started after newSince
		stop       atomic.Bool
		panics     atomic.Value
	)
	const goroutines = 8
	calls := make([][]*failoverCall, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					panics.Store(fmt.Sprint(p))
				}
			}()
			for i := g; !stop.Load(); i++ {
				c := &failoverCall{rule: i % numRules, start: time.Now()}
				_, c.err = rules[c.rule].Admit(context.WithValue(context.Background(), failoverCallKey{}, c), l, 1, "")
				c.end = time.Now()
				calls[g] = append(calls[g], c)
				if out := c.outcome(); out == outBackend || out == outCache {
					decided[c.rule].Add(1)
					if c.rule == ruleCapped && out == outBackend && !c.allowed {
						cappedDeny.Add(1)
					}
					if since := newSince.Load(); since != 0 && c.start.UnixNano() > since {
						decidedNew[c.rule].Add(1)
					}
				}
				// Leave the CPU to Redis and the sentinels: this is a
				// service's traffic, not a benchmark.
				time.Sleep(time.Millisecond)
			}
		})
	}
	stopCalls := func() {
		stop.Store(true)
		wg.Wait()
	}
	defer stopCalls()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				stopCalls()
				t.Fatalf("%s: gave up after %s", what, 2*time.Minute)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Before the failover: every rule decided, the capped one denied.
	waitFor("warm-up", func() bool {
		for r := range numRules {
			if decided[r].Load() < 100 {
				return false
			}
		}
		return cappedDeny.Load() > 0
	})
	// Every write the primary made before WAIT (the capped rule's charges
	// among them: its denials charge nothing) is on the replica.
	synced := time.Now()
	acked, err := admin.Wait(ctx, 1, time.Minute).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked, "the replica acknowledged the primary's writes")

	began := time.Now()
	old, err := failover(ctx, d, admin)
	require.NoError(t, err)
	require.Equal(t, oldPrimary, old)
	newPrimary, err := d.WaitPrimary(ctx, old)
	require.NoError(t, err)
	agreed := time.Now()
	var dialed time.Time
	waitFor("the client's first dial to the new primary", func() bool {
		var ok bool
		dialed, ok = dials.firstDial(newPrimary)
		return ok
	})
	newSince.Store(dialed.UnixNano())
	waitFor("decisions on the new primary", func() bool {
		for r := range numRules {
			if decidedNew[r].Load() < 50 {
				return false
			}
		}
		return true
	})
	stopCalls()
	if p := panics.Load(); p != nil {
		t.Fatalf("a call panicked: %v", p)
	}

	var all []*failoverCall
	for _, cs := range calls {
		all = append(all, cs...)
	}
	slices.SortFunc(all, func(a, b *failoverCall) int { return a.start.Compare(b.start) })

	// recovered is when the first call sent after the client dialled the
	// new primary was decided: the first decision made there, since every
	// connection to the old primary was closed before that dial.
	var recovered time.Time
	for _, c := range all {
		if c.start.After(dialed) && c.outcome() == outBackend && (recovered.IsZero() || c.end.Before(recovered)) {
			recovered = c.end
		}
	}
	require.False(t, recovered.IsZero(), "no decision on the new primary")

	var (
		outcomes       [numRules][numOutcomes]int
		admitted       [numRules][numOutcomes]int
		lostBound      int // ruleCounted's admissions by Redis of calls that ended after synced and started before dialed
		firstFailure   time.Time
		lastFailureEnd time.Time
		violations     []string
		unanswered     int // admissions of the counted rule by the fallback whose script Redis may have run
	)
	violation := func(c *failoverCall, format string, args ...any) {
		violations = append(violations, fmt.Sprintf("a call of %s from %s to %s after the failover began (%s, err %v): ",
			rules[c.rule].Name, c.start.Sub(began), c.end.Sub(began), outcomeNames[c.outcome()], c.err)+fmt.Sprintf(format, args...))
	}
	// What a call that Redis could not decide comes to, by its rule.
	wantOut := [numRules]failoverOutcome{ruleCounted: outFallback, ruleCapped: outFallback, ruleOpen: outPassed, ruleClosed: outFailed}
	for _, c := range all {
		out := c.outcome()
		outcomes[c.rule][out]++
		if c.allowed && (out == outBackend || out == outFallback) {
			admitted[c.rule][out]++
		}
		if c.rule == ruleCounted && c.allowed && out == outFallback && c.unanswered {
			unanswered++
		}
		if c.rule == ruleCounted && out == outBackend && c.end.After(synced) && c.start.Before(dialed) {
			lostBound++
		}
		// A call fails only as its rule's policy says, or is shed (denied
		// with a retry, whatever the policy) while the limiter rejoins
		// Redis after the failover.
		var be *ratelimit.BackendError
		var le *ratelimit.LimitError
		if errors.As(c.err, &le) && le.Source == ratelimit.SourceBusy {
			if !c.end.After(began) {
				violation(c, "shed before the failover began")
			}
			continue
		}
		switch {
		case out == outFailed:
			if !errors.As(c.err, &be) || !errors.Is(c.err, ratelimit.ErrBackend) || be.Name != rules[c.rule].Name {
				violation(c, "not a BackendError of the rule")
			}
		case c.decided && !c.allowed:
			if !errors.As(c.err, &le) {
				violation(c, "a denial without a LimitError")
			}
		case c.err != nil:
			violation(c, "an error")
		}
		if out == outBackend || out == outCache {
			continue
		}
		if out != wantOut[c.rule] {
			violation(c, "the policy %s wants %s", rules[c.rule].OnError, outcomeNames[wantOut[c.rule]])
		}
		// Only around the failover.
		if firstFailure.IsZero() {
			firstFailure = c.start
		}
		lastFailureEnd = maxTime(lastFailureEnd, c.end)
		if !c.end.After(began) {
			violation(c, "Redis failed before the failover began")
		}
		if !c.start.Before(recovered) {
			violation(c, "Redis failed after its first decision on the new primary, %s after the failover began", recovered.Sub(began))
		}
	}
	if len(violations) > 0 {
		t.Errorf("%d calls went wrong, such as:\n%s", len(violations), strings.Join(violations[:min(len(violations), 10)], "\n"))
	}

	// The rule at its limit: Redis admitted it exactly its limit, all
	// before the failover; the fallback at most its limit again.
	assert.Equal(t, cappedThreshold, admitted[ruleCapped][outBackend], "admissions of the capped rule by Redis")
	assert.LessOrEqual(t, admitted[ruleCapped][outFallback], cappedThreshold, "admissions of the capped rule by the fallback")
	peek := func(r int) int64 {
		for {
			p, err := l.Peek(ctx, ratelimit.Request{Name: rules[r].Name, Limits: rules[r].Limits})
			if err == nil {
				return rules[r].Limits[0].Threshold - p.Remaining
			}
			// A peek charges nothing: ask again when its reply came after
			// the client's short timeout, as on a loaded machine.
			require.ErrorIs(t, err, ratelimit.ErrBackend)
			require.NoError(t, ctx.Err(), "peek: %v", err)
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The breaker closes once a probe finds Redis back and the fallback
	// has carried back what it admitted, in the background: on a loaded
	// machine, calls stuck on the old primary may open it after the calls
	// on the new one had begun, and the goroutines stop before it closes.
	// Its carry-back done, the counts below are final.
	waitFor("the breaker to close", func() bool { return !l.CircuitOpen() })
	// What the ledger charged the new primary again: the admissions after
	// the last mark it held, some of which it may have had (a documented
	// double charge, which errs towards denying).
	_, recharged, _ := l.fallback.Restored()
	capped := peek(ruleCapped)
	assert.GreaterOrEqual(t, capped, int64(cappedThreshold), "the new primary counts the capped rule's charges")
	assert.LessOrEqual(t, capped, int64(cappedThreshold)+recharged, "and at most what the ledger charged again besides")

	// The counted rule: Redis admitted every call it decided; the new
	// primary counts those it decided, those of the old primary that
	// reached it, and the calls that failed (each was admitted by the
	// fallback): once each, whether the fallback's admission was carried
	// back (a carry-back whose reply is lost is not sent again) or Redis
	// charged the call before its reply was lost; twice only when both
	// happened: Redis ran the script of a call whose reply was lost, and
	// the fallback admitted it and carried it back (a documented double
	// charge, which errs towards denying), and the ledger's charges again.
	// So the count exceeds the admissions by at most the failed calls,
	// those unanswered ones and what the ledger charged again.
	counted := peek(ruleCounted)
	lost := int64(admitted[ruleCounted][outBackend]) - counted
	assert.GreaterOrEqual(t, lost, -int64(outcomes[ruleCounted][outFallback]+unanswered)-recharged,
		"the new primary counts more than Redis admitted, the failed calls, the unanswered ones and the ledger's charges")
	assert.LessOrEqual(t, lost, int64(lostBound), "charges lost, of calls that ended after the replica had caught up")
	if writesPaused {
		assert.LessOrEqual(t, lost, int64(0), "charges lost with writes paused before the failover")
	}
	// The lost charges are about the old primary's last ones: the time
	// they span tells how long it took charges after the promotion.
	var lostSpan time.Duration
	if lost > 0 {
		var ends []time.Time
		for _, c := range all {
			if c.rule == ruleCounted && c.outcome() == outBackend && c.end.Before(dialed) {
				ends = append(ends, c.end)
			}
		}
		slices.SortFunc(ends, time.Time.Compare)
		if n := len(ends); int(lost) <= n {
			lostSpan = dialed.Sub(ends[n-int(lost)])
		}
	}

	// Decisions came back from the new primary; a generous bound (the
	// failover itself takes a few seconds: SentinelDownAfter, an election,
	// the promotion).
	assert.Less(t, recovered.Sub(began), 30*time.Second, "time to the first decision on the new primary")

	hook.mu.Lock()
	breaker := fmt.Sprintf("opened %d times, closed after %v", len(hook.opened), hook.closed)
	hook.mu.Unlock()
	failures := "no call failed"
	if !firstFailure.IsZero() {
		failures = fmt.Sprintf("calls failed from %s to %s after it began", firstFailure.Sub(began).Round(time.Millisecond), lastFailureEnd.Sub(began).Round(time.Millisecond))
	}
	t.Logf("%d calls in %s", len(all), all[len(all)-1].end.Sub(all[0].start).Round(time.Millisecond))
	t.Logf("first decision on the new primary %s after the failover began (sentinels agreed on it after %s, the client dialled it after %s); %s; breaker %s",
		recovered.Sub(began).Round(time.Millisecond), agreed.Sub(began).Round(time.Millisecond), dialed.Sub(began).Round(time.Millisecond),
		failures, breaker)
	for r := range numRules {
		t.Logf("%-16s %v admitted by Redis %d, by the fallback %d", rules[r].Name, outcomeLine(outcomes[r]), admitted[r][outBackend], admitted[r][outFallback])
	}
	t.Logf("charges lost: %d, those of the last %s before the client dialled the new primary (Redis admitted %d calls of %s, the new primary counts %d; at most %d could be lost); the capped rule admitted %d+%d for a limit of %d; the ledger charged %d units again",
		lost, lostSpan.Round(time.Millisecond), admitted[ruleCounted][outBackend], rules[ruleCounted].Name, counted, lostBound,
		admitted[ruleCapped][outBackend], admitted[ruleCapped][outFallback], cappedThreshold, recharged)
}

func outcomeLine(n [numOutcomes]int) string {
	s := ""
	for i, c := range n {
		if c > 0 {
			s += fmt.Sprintf("%s=%d ", outcomeNames[i], c)
		}
	}
	return s
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
