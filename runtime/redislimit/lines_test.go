package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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

// linesSets returns limits of calls with a key per limit: each algorithm
// keyed per user beside a global sliding log, and three lines of mixed
// algorithms.
func linesSets() []agreeSet {
	var sets []agreeSet
	for _, alg := range ratelimit.Algorithms() {
		sets = append(sets, agreeSet{name: string(alg), limits: []ratelimit.Limit{
			{Algorithm: alg, Period: 50 * time.Millisecond, Threshold: 3},
			{Period: time.Second, Threshold: 12},
		}, maxCost: 2})
	}
	return append(sets,
		agreeSet{name: "mixed", limits: []ratelimit.Limit{
			{Algorithm: ratelimit.TokenBucket, Period: 40 * time.Millisecond, Threshold: 3, Burst: 4},
			{Algorithm: ratelimit.FixedWindow, Period: 100 * time.Millisecond, Threshold: 7},
			{Algorithm: ratelimit.SlidingWindow, Period: 200 * time.Millisecond, Threshold: 9},
		}, maxCost: 3},
		agreeSet{name: "gcra+leaky", limits: []ratelimit.Limit{
			{Algorithm: ratelimit.GCRA, Period: 30 * time.Millisecond, Threshold: 2},
			{Algorithm: ratelimit.LeakyBucket, Period: 60 * time.Millisecond, Threshold: 5, Capacity: 3},
		}, maxCost: 2},
	)
}

// linesRequest returns a call of limits with a random key per limit (a
// few users, or "" for a global line) and cost.
func linesRequest(rng *rand.Rand, set agreeSet) ratelimit.Request {
	req := set.request(rng, set.limits)
	req.Key = ""
	req.Keys = make([]string, len(set.limits))
	for i := range req.Keys {
		if rng.IntN(3) > 0 {
			req.Keys[i] = fmt.Sprint("u", rng.IntN(3))
		}
	}
	return req
}

// linesAgree feeds one random sequence of calls with a key per limit to
// the twin and to limiter (on the pinned clock), and requires identical
// decisions; false when the sequence stalled in real time (see
// realTimeGuard).
func linesAgree(t *testing.T, set agreeSet, seed uint64, newLimiter func(clock ratelimit.Clock) ratelimit.Limiter) bool {
	rng := rand.New(rand.NewPCG(seed, uint64(len(set.name))))
	clock := newManualClock()
	mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
	red := newLimiter(clock)
	guard := newRealTimeGuard(clock, set.limits...)
	admitted, denied := 0, 0
	for i := range 200 {
		set.step(rng, clock, i, 200)
		req := linesRequest(rng, set)
		guard.start()
		dm, dr := allow(t, mem, req), allow(t, red, req)
		pm, err := ratelimit.Peek(context.Background(), mem, req)
		require.NoError(t, err)
		pr, err := ratelimit.Peek(context.Background(), red, req)
		require.NoError(t, err)
		if guard.stalled() {
			return false
		}
		require.Equal(t, dm, dr, "seed %d call %d at %s: %+v", seed, i, clock.Now().Format(time.StampMicro), req)
		require.Equal(t, pm, pr, "peek, seed %d call %d: %+v", seed, i, req)
		if dm.Allowed {
			admitted++
		} else {
			denied++
		}
	}
	require.NotZero(t, admitted)
	require.NotZero(t, denied)
	return true
}

// TestLinesBackendsAgree: calls with a key per limit get the twin's
// decisions from a single server, with its own script and the generic one
// and batched, and their Peeks the twin's too.
func TestLinesBackendsAgree(t *testing.T) {
	for _, set := range linesSets() {
		t.Run(set.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 2; seed++ {
				untilCalm(t, stalledMsg, func() bool {
					return linesAgree(t, set, seed, func(clock ratelimit.Clock) ratelimit.Limiter {
						return newTestRedis(t, ratelimit.WithClock(clock))
					})
				})
			}
		})
	}
}

// TestLinesPerUserAndForEveryone is the example of docs/keys-and-costs.md on a single server: 10
// per second per user and 1000 per hour for everyone, with many users.
func TestLinesPerUserAndForEveryone(t *testing.T) {
	clock := newManualClock()
	perUserAndForEveryone(t, newTestRedis(t, ratelimit.WithClock(clock)), clock)
}

// perUserAndForEveryone checks the example of docs/keys-and-costs.md (a key per line) on limiter, whose clock is
// clock: 150 users calling 12 times a second get 10 each a second, until
// 1000 have passed in total.
func perUserAndForEveryone(t *testing.T, l ratelimit.Limiter, clock *manualClock) {
	r := &ratelimit.Rule{
		Name:     "svc.Post",
		Limits:   []ratelimit.Limit{{Period: time.Second, Threshold: 10}, {Period: time.Hour, Threshold: 1000}},
		KeyExprs: []string{"user", ""},
	}
	ctx := context.Background()
	admitted := 0
	for u := range 150 {
		user := fmt.Sprint("user", u)
		for c := range 12 {
			err := r.Check(ctx, l, 1, user, "")
			if err == nil {
				admitted++
				continue
			}
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le)
			if c >= 10 && admitted < 1000 {
				require.Equal(t, "user", le.KeyExpr, "user %d call %d", u, c)
				require.Equal(t, user, le.Key)
				require.NotContains(t, le.Error(), user)
			} else {
				require.Equal(t, "", le.KeyExpr, "the global line denies: user %d call %d", u, c)
				require.EqualValues(t, 1000, le.Limit.Threshold)
			}
		}
		clock.Advance(time.Second)
	}
	assert.Equal(t, 1000, admitted)
}

// contention is the shape of a contended run of a rule with a line per
// user and a global line: users each call perUser times, concurrently,
// against perUserLimit per user and a global limit of exactly what the
// users may take in all, so that one atomic decision of both lines admits
// exactly global calls, each user perUserLimit.
type contention struct {
	users, perUser int
	perUserLimit   int64
	alg            ratelimit.Algorithm
}

func (c contention) global() int64 { return int64(c.users) * c.perUserLimit }

func (c contention) rule(name string) *ratelimit.Rule {
	period := time.Hour // nothing refills during the run, nearly
	if c.alg == ratelimit.TokenBucket || c.alg == ratelimit.GCRA || c.alg == ratelimit.LeakyBucket {
		period = 1000 * time.Hour
	}
	return &ratelimit.Rule{
		Name: name,
		Limits: []ratelimit.Limit{
			{Algorithm: c.alg, Period: period, Threshold: c.perUserLimit},
			{Algorithm: c.alg, Period: period, Threshold: c.global()},
		},
		KeyExprs: []string{"user", ""},
	}
}

// run makes every call of c with goroutines goroutines spread over
// limiters (the processes), and returns the admissions per user and the
// calls denied.
func (c contention) run(t *testing.T, rule *ratelimit.Rule, limiters []ratelimit.Limiter, goroutines int) (admitted []int64, denied int64) {
	admitted = make([]int64, c.users)
	calls := make(chan int, c.users*c.perUser)
	for round := range c.perUser {
		for u := range c.users {
			calls <- (u*7 + round*13) % c.users
		}
	}
	close(calls)
	var wg sync.WaitGroup
	var deniedN atomic.Int64
	counts := make([]atomic.Int64, c.users)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := limiters[g%len(limiters)]
			for u := range calls {
				err := rule.Check(context.Background(), l, 1, fmt.Sprint("user", u), "")
				var le *ratelimit.LimitError
				switch {
				case err == nil:
					counts[u].Add(1)
				case errors.As(err, &le):
					deniedN.Add(1)
				default:
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for u := range counts {
		admitted[u] = counts[u].Load()
	}
	return admitted, deniedN.Load()
}

// check requires that no line admitted more than its limit, and that each
// line holds exactly the charges of the calls admitted: none of a denied
// call is left. It returns how many calls fewer than one atomic decision
// would admit were admitted: those lost to denials by a charge that was
// then refunded.
func (c contention) check(t *testing.T, rule *ratelimit.Rule, l ratelimit.Limiter, admitted []int64) (lost int64) {
	var total int64
	for u, n := range admitted {
		require.LessOrEqual(t, n, c.perUserLimit, "user %d", u)
		total += n
	}
	require.LessOrEqual(t, total, c.global())
	huge := ratelimit.Limit{Period: time.Hour, Threshold: 1 << 20}
	remaining := func(keys []string, limits []ratelimit.Limit) int64 {
		d, err := ratelimit.Peek(context.Background(), l, ratelimit.Request{Name: rule.Name, Keys: keys, Limits: limits})
		require.NoError(t, err)
		return d.Remaining
	}
	for u, n := range admitted {
		left := remaining([]string{fmt.Sprint("user", u), "nobody"}, []ratelimit.Limit{rule.Limits[0], huge})
		require.Equal(t, c.perUserLimit-n, left, "user %d's line holds exactly its admissions", u)
	}
	left := remaining([]string{"nobody", ""}, []ratelimit.Limit{huge, rule.Limits[1]})
	require.Equal(t, c.global()-total, left, "the global line holds exactly the admissions")
	return c.global() - total
}

// testContention runs rounds of c on limiters (fresh names each round),
// checks each, and returns the calls lost and made.
func testContention(t *testing.T, c contention, rounds int, limiters []ratelimit.Limiter) (lost, calls int64) {
	for r := range rounds {
		rule := c.rule(fmt.Sprintf("contended.%s.%d", c.alg, r))
		admitted, _ := c.run(t, rule, limiters, 16)
		lost += c.check(t, rule, limiters[0], admitted)
		calls += int64(c.users * c.perUser)
	}
	return lost, calls
}

// TestLinesDenialChargesNoOtherLine: under contention from many
// goroutines of several processes, a call denied by one line charges no
// other, so one atomic decision's admissions are all made, on the memory
// limiter and on a single server.
func TestLinesDenialChargesNoOtherLine(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.GCRA} {
		c := contention{users: 40, perUser: 5, perUserLimit: 4, alg: alg}
		t.Run("memory/"+string(alg), func(t *testing.T) {
			lost, _ := testContention(t, c, 2, []ratelimit.Limiter{ratelimit.NewMemory()})
			assert.Zero(t, lost)
		})
		t.Run("redis/"+string(alg), func(t *testing.T) {
			limiters := []ratelimit.Limiter{newTestRedis(t)}
			for range 2 {
				limiters = append(limiters, newTest(rdb(t), WithDenyCache(0), withoutHeartbeat()))
			}
			lost, _ := testContention(t, c, 2, limiters)
			assert.Zero(t, lost, "one script run decides every line")
		})
	}
}

// TestLinesKeysAndErrors: a request's Keys must have one key per limit;
// its limits' keys are (name, key, index) as a call with that one key
// would keep them.
func TestLinesKeysAndErrors(t *testing.T) {
	l := newTestRedis(t)
	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 2}, {Period: time.Minute, Threshold: 5}}
	_, err := l.Allow(context.Background(), ratelimit.Request{Name: "n", Keys: []string{"a"}, Limits: lim})
	require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
	allow(t, l, ratelimit.Request{Name: "n", Keys: []string{"alice", ""}, Limits: lim})
	c := rdb(t)
	for _, key := range []string{l.Key("n", "alice", 0, ""), l.Key("n", "", 1, "")} {
		n, err := c.LLen(context.Background(), key).Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, key)
	}
	// Reset of a key clears its lines.
	require.NoError(t, l.Reset(context.Background(), "n", "alice"))
	assert.Zero(t, c.Exists(context.Background(), l.Key("n", "alice", 0, "")).Val())
	assert.EqualValues(t, 1, c.Exists(context.Background(), l.Key("n", "", 1, "")).Val())
}

// linesAgree: on a cluster, where the lines of a call with different keys
// are decided per key and refunded when another denies, the decisions are
// the twin's, and so are the states the refunds leave (which every later
// decision reads).
func (ct *clusterTest) linesAgree(t *testing.T) {
	for _, set := range linesSets() {
		t.Run(set.name, func(t *testing.T) {
			untilCalm(t, stalledMsg, func() bool {
				return linesAgree(t, set, 1, func(clock ratelimit.Clock) ratelimit.Limiter {
					l, _ := ct.limiter(t, ratelimit.WithClock(clock))
					return l
				})
			})
		})
	}
}

func (ct *clusterTest) linesPerUserAndForEveryone(t *testing.T) {
	clock := newManualClock()
	l, c := ct.limiter(t, ratelimit.WithClock(clock))
	perUserAndForEveryone(t, l, clock)
	// The users' lines spread over the masters; the global line is on one.
	masters := 0
	for _, keys := range keysByMaster(t, c) {
		if len(keys) > 0 {
			masters++
		}
	}
	assert.Equal(t, 3, masters, "the keys of 150 users spread over every master")
}

// linesContention runs contended calls of a rule with a line per user and
// a global line on the cluster, from 16 goroutines over three limiters
// (each its own client: the processes): no line admits more than its
// limit, a denied call leaves no charge, and the calls lost to a denial
// by a charge that was then refunded are counted and logged.
func (ct *clusterTest) linesContention(t *testing.T) {
	ct.cluster.Flush(t)
	var limiters []ratelimit.Limiter
	for range 3 {
		limiters = append(limiters, newTest(ct.client(t), withoutHeartbeat()))
	}
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			c := contention{users: 40, perUser: 5, perUserLimit: 4, alg: alg}
			lost, calls := testContention(t, c, 5, limiters)
			t.Logf("%s: %d of %d calls (%.2f%%) lost to a denial by a charge then refunded", alg, lost, calls, 100*float64(lost)/float64(calls))
		})
	}
}

// carryBackLines: what the fallback admitted of calls with a key per
// limit is carried back to each limit's own key, one charge per key (on a
// cluster, each on its master).
func carryBackLines(t *testing.T, l *Limiter, c redis.Cmdable) {
	ctx := context.Background()
	limits := []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, {Period: time.Hour, Threshold: 100}}
	for _, user := range []string{"ann", "bob", "ann"} {
		d, _, err := l.AllowLocal(ctx, ratelimit.Request{Name: "carried", Keys: []string{user, ""}, Limits: limits})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.Equal(t, 3, l.fallback.Held())
	l.fallback.CarryBack(ctx)
	require.Zero(t, l.fallback.Held())
	for key, want := range map[string]int64{
		l.Key("carried", "ann", 0, ""): 2,
		l.Key("carried", "bob", 0, ""): 1,
		l.Key("carried", "", 1, ""):    3,
	} {
		n, err := c.LLen(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, want, n, key)
	}
}

func TestLinesCarryBack(t *testing.T) {
	l := newTestRedis(t, WithBreaker(2, time.Hour, time.Hour))
	carryBackLines(t, l, rdb(t))
}

func (ct *clusterTest) linesCarryBack(t *testing.T) {
	l, c := ct.limiter(t, WithBreaker(2, time.Hour, time.Hour))
	carryBackLines(t, l, c)
}

// linesPeekAndReset: on a cluster, Peek of a call with a key per limit
// reads each key on its master, charging nothing, and Reset of a key
// clears its limits only.
func (ct *clusterTest) linesPeekAndReset(t *testing.T) {
	ctx := context.Background()
	l, _ := ct.limiter(t)
	r := &ratelimit.Rule{Name: "peeked", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 3}, {Period: time.Hour, Threshold: 10}}, KeyExprs: []string{"user", ""}}
	for range 2 {
		require.NoError(t, r.Check(ctx, l, 1, "ann", ""))
	}
	for range 2 {
		d, err := r.Peek(ctx, l, "ann", "")
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.EqualValues(t, 1, d.Remaining, "ann's line, before the call")
		assert.Equal(t, 0, d.LimitIndex)
	}
	require.NoError(t, l.Reset(ctx, "peeked", "ann"))
	d, err := r.Peek(ctx, l, "ann", "")
	require.NoError(t, err)
	assert.EqualValues(t, 3, d.Remaining, "ann's line is reset")
	d, err = ratelimit.Peek(ctx, l, ratelimit.Request{Name: "peeked", Keys: []string{"nobody", ""}, Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 100}, r.Limits[1]}})
	require.NoError(t, err)
	assert.EqualValues(t, 8, d.Remaining, "the global line is not")
}

// linesFailureRefunds: on a cluster, when one key's run fails (here a key
// of another type: WRONGTYPE) after another key's run charged the call,
// the charge is refunded and the call fails as any backend failure does.
func (ct *clusterTest) linesFailureRefunds(t *testing.T) {
	ctx := context.Background()
	l, c := ct.limiter(t)
	limits := []ratelimit.Limit{{Period: time.Hour, Threshold: 3}, {Period: time.Hour, Threshold: 10}}
	require.NoError(t, c.HSet(ctx, l.Key("broken", "", 1, ""), "f", "v").Err())
	_, err := l.Allow(ctx, ratelimit.Request{Name: "broken", Keys: []string{"ann", ""}, Limits: limits})
	require.ErrorIs(t, err, ratelimit.ErrBackend)
	n, err := c.Exists(ctx, l.Key("broken", "ann", 0, "")).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "ann's charge was refunded")
}

// linesSettleFailureChangesBack: on a cluster, a settle of a reservation
// with a key per limit whose second key's run fails (WRONGTYPE) after the
// first key's run charged on top has the first changed back: all or
// nothing, as a decision is.
func (ct *clusterTest) linesSettleFailureChangesBack(t *testing.T) {
	ctx := context.Background()
	l, c := ct.limiter(t)
	r := &ratelimit.Rule{Name: "settled", KeyExprs: []string{"user", ""},
		Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 10}, {Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 10}}}
	awaitRoom(t, time.Hour, 10*time.Second)
	res, err := r.Reserve(ctx, l, 1, "ann", "")
	require.NoError(t, err)
	ann, global := l.Key("settled", "ann", 0, ratelimit.FixedWindow), l.Key("settled", "", 1, ratelimit.FixedWindow)
	require.NoError(t, c.Del(ctx, global).Err())
	require.NoError(t, c.HSet(ctx, global, "f", "v").Err())
	require.ErrorIs(t, res.Settle(ctx, 4), ratelimit.ErrBackend)
	n, err := c.Get(ctx, ann).Int64()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "ann's charge on top was changed back")
}

// TestLinesBehindSentinel: behind Sentinel, as on a single server, one
// script run decides every line of the example of docs/keys-and-costs.md.
func TestLinesBehindSentinel(t *testing.T) {
	d, err := redistest.StartSentinel(1, 1)
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, d.WaitReady(ctx))
	// Timeouts no loaded machine reaches, and failures that fail the call
	// rather than let it through: the count is exact.
	opts := d.FailoverOptions()
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = time.Minute, time.Minute, time.Minute, time.Minute
	client := redis.NewFailoverClient(FailoverOptions(opts))
	t.Cleanup(func() { client.Close() })
	clock := newManualClock()
	perUserAndForEveryone(t, newTest(client, ratelimit.WithClock(clock), ratelimit.WithErrorPolicy(ratelimit.FailClosed), withoutHeartbeat()), clock)
}

// BenchmarkLinesRedis compares, on the test server, a call of a user's
// limit and a global one with a call of the same two limits under the
// user's one key: both are one script run.
func BenchmarkLinesRedis(b *testing.B) {
	limits := []ratelimit.Limit{{Period: time.Second, Threshold: 1 << 40}, {Period: time.Hour, Threshold: 1 << 40}}
	ctx := context.Background()
	b.Run("shared", func(b *testing.B) {
		l := newTestRedis(b, WithBatching(0))
		for b.Loop() {
			if _, err := l.Allow(ctx, ratelimit.Request{Name: "bench", Key: "user-42", Limits: limits}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("perLine", func(b *testing.B) {
		l := newTestRedis(b, WithBatching(0))
		keys := []string{"user-42", ""}
		for b.Loop() {
			if _, err := l.Allow(ctx, ratelimit.Request{Name: "bench", Keys: keys, Limits: limits}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRefundOfABucket: a bucket's refund restores the TAT when no call
// charged it since, and otherwise moves it back by the call's interval
// less what the bucket refilled since the call, never earlier than the
// later call alone would have left it.
func TestRefundOfABucket(t *testing.T) {
	ctx := context.Background()
	c := rdb(t)
	l := newTestRedis(t)
	lim := ratelimit.Limit{Algorithm: ratelimit.GCRA, Period: time.Second, Threshold: 10} // 100,000µs a unit
	key := l.Key("refund", "k", 0, lim.Algorithm)
	t0 := time.Now().UnixMicro()
	args := func(now int64) []any {
		return []any{now, 1, string(lim.Algorithm), lim.Period.Microseconds(), lim.Threshold, lim.MaxCost()}
	}
	charge := func(now int64) []any {
		res, err := linesScript.Run(ctx, c, []string{key}, args(now)...).Result()
		require.NoError(t, err)
		d, recs, err := parseLines(res, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		return recs
	}
	refund := func(now int64, recs []any) {
		require.NoError(t, refundScript.Run(ctx, c, []string{key}, append(args(now), recs...)...).Err())
	}

	// Alone: the key is as it was (none).
	refund(t0+50_000, charge(t0))
	assert.Zero(t, c.Exists(ctx, key).Val())

	// Another call since: TAT - k + min(k, now - ta).
	recs := charge(t0)
	_, err := decideScript.Run(ctx, c, []string{key}, args(t0+30_000)...).Result()
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(t0+200_000), c.Get(ctx, key).Val())
	refund(t0+50_000, recs)
	assert.Equal(t, fmt.Sprint(t0+150_000), c.Get(ctx, key).Val(), "the later call alone would have left %d", t0+130_000)
}

// TestRefundOfAWindowAndALog: a window's refund takes the cost off the
// window the call counted in (a sliding window's previous count once it
// moved on), none once that window ended; a log's removes the call's
// entries, and keeps a marked entry for the TTL.
func TestRefundOfAWindowAndALog(t *testing.T) {
	ctx := context.Background()
	c := rdb(t)
	l := newTestRedis(t)
	run := func(lim ratelimit.Limit, key string, now int64, cost int) []any {
		args := []any{now, cost, string(lim.AlgorithmOrDefault()), lim.Period.Microseconds(), lim.Threshold, lim.MaxCost()}
		res, err := linesScript.Run(ctx, c, []string{key}, args...).Result()
		require.NoError(t, err)
		d, recs, err := parseLines(res, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		return append(args, recs...)
	}
	refund := func(key string, now int64, args []any) {
		args = slices.Clone(args)
		args[0] = now
		require.NoError(t, refundScript.Run(ctx, c, []string{key}, args...).Err())
	}
	base := newManualClock().Now().UnixMicro() // 2100: windows expire on it
	base -= base % 1_000_000

	sw := ratelimit.Limit{Algorithm: ratelimit.SlidingWindow, Period: time.Second, Threshold: 100}
	key := l.Key("refund", "sw", 0, sw.Algorithm)
	run(sw, key, base+100, 3)
	mine := run(sw, key, base+200, 2)
	run(sw, key, base+1_000_100, 1) // the next window: 5 moved to the previous count
	refund(key, base+1_000_200, mine)
	assert.Equal(t, fmt.Sprint(3*prevScale+1), c.Get(ctx, key).Val(), "the call's 2 taken off the previous count")

	fw := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 100}
	key = l.Key("refund", "fw", 0, fw.Algorithm)
	run(fw, key, base+100, 3)
	mine = run(fw, key, base+200, 2)
	refund(key, base+300, mine)
	assert.Equal(t, "3", c.Get(ctx, key).Val())
	mine = run(fw, key, base+400, 2)
	run(fw, key, base+1_000_100, 1) // a new window
	refund(key, base+1_000_200, mine)
	assert.Equal(t, "1", c.Get(ctx, key).Val(), "the ended window's charge no longer counts")

	log := ratelimit.Limit{Period: time.Second, Threshold: 100}
	key = l.Key("refund", "log", 0, log.Algorithm)
	mine = run(log, key, base+100, 2) // the first call marks its entries
	run(log, key, base+200, 1)
	refund(key, base+300, mine)
	entries, err := c.LRange(ctx, key, 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{fmt.Sprint(-(base + 200))}, entries, "the call's entries are gone, the mark moved to the newest left")
	ttl, err := c.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Second, "the TTL is set from the newest entry")
}
