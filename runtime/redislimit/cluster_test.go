package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// clusterAlgorithms lists the algorithms the cluster tests decide: all of
// them, and mixedLimits pairs each with SlidingLog.
func clusterAlgorithms() []ratelimit.Algorithm { return ratelimit.Algorithms() }

// mixedLimits returns two-limit requests' limits: SlidingLog with each
// algorithm (so SlidingLog with itself, too).
func mixedLimits() [][]ratelimit.Limit {
	var out [][]ratelimit.Limit
	for _, alg := range clusterAlgorithms() {
		out = append(out, []ratelimit.Limit{
			{Period: time.Second, Threshold: 2, Algorithm: ratelimit.SlidingLog},
			{Period: time.Hour, Threshold: 3, Algorithm: alg},
		})
	}
	return out
}

// TestCluster runs the Redis limiter against a real three-master Redis
// Cluster, started once for all its subtests. It runs in parallel with
// TestClusterConformance and TestConformanceSentinel, once the package's
// other tests are done: each has servers of its own, and waits on real
// time more than it computes.
func TestCluster(t *testing.T) {
	t.Parallel()
	c, err := redistest.StartCluster(3)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	ct := &clusterTest{cluster: c}

	t.Run("ExactWithServerTime", ct.exactWithServerTime)
	t.Run("PerKeySeparation", ct.perKeySeparation)
	t.Run("MultiLimitDenialChargesNothing", ct.multiLimitDenialChargesNothing)
	t.Run("SameDecisionsAsSingleServer", ct.sameDecisionsAsSingleServer)
	t.Run("KeysOfOneCallShareASlot", ct.keysOfOneCallShareASlot)
	t.Run("KeysSpreadOverMasters", ct.keysSpreadOverMasters)
	t.Run("HostileKeys", ct.hostileKeys)
	t.Run("LongKeys", ct.longKeys)
	t.Run("FallbackDuringStall", ct.fallbackDuringStall)
	t.Run("PeekAndReset", ct.peekAndReset)
	t.Run("KeyOverrides", ct.keyOverrides)
	t.Run("HealthCheck", ct.healthCheck)
	t.Run("LinesAgree", ct.linesAgree)
	t.Run("WeightedLinesAgree", ct.weightedLinesAgree)
	t.Run("HeldLinesAgree", ct.heldLinesAgree)
	t.Run("LinesPerUserAndForEveryone", ct.linesPerUserAndForEveryone)
	t.Run("LinesContention", ct.linesContention)
	t.Run("LinesCarryBack", ct.linesCarryBack)
	t.Run("LinesPeekAndReset", ct.linesPeekAndReset)
	t.Run("LinesFailureRefunds", ct.linesFailureRefunds)
	t.Run("LinesSettleFailureChangesBack", ct.linesSettleFailureChangesBack)
	t.Run("LinesCalendar", ct.linesCalendar)
	t.Run("ReserveAcrossSlots", ct.reserveAcrossSlots)
	t.Run("LedgerRefillsAFlushedMaster", ct.ledgerRefillsAFlushedMaster)
	t.Run("LedgerAcrossAMasterRestart", ct.ledgerAcrossAMasterRestart)
	// Last: it kills a master, and the cluster stays that way.
	t.Run("MasterDown", ct.masterDown)
}

// TestClusterConformance runs the conformance suite (see
// clusterTest.conformance) on a three-master Cluster of its own, in
// parallel with TestCluster: the suite waits on real time for minutes,
// TestCluster's other subtests for about one, and each flushes the cluster
// before it starts, so a cluster of its own changes nothing but the wall
// time.
func TestClusterConformance(t *testing.T) {
	t.Parallel() // see TestCluster
	c, err := redistest.StartCluster(3)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	(&clusterTest{cluster: c}).conformance(t)
}

type clusterTest struct {
	cluster *redistest.Cluster
}

// client returns a cluster client closed when the test ends.
func (ct *clusterTest) client(t *testing.T) *redis.ClusterClient {
	c := ct.cluster.Client()
	t.Cleanup(func() { c.Close() })
	return c
}

// limiter returns a Redis limiter on the flushed cluster.
func (ct *clusterTest) limiter(t *testing.T, opts ...Option) (*Limiter, *redis.ClusterClient) {
	ct.cluster.Flush(t)
	c := ct.client(t)
	return newTest(c, append([]Option{withoutHeartbeat()}, opts...)...), c
}

// keysByMaster SCANs every master and returns its keys by its address.
func keysByMaster(t *testing.T, c *redis.ClusterClient) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	keys := map[string][]string{}
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		var found []string
		it := m.Scan(ctx, 0, "*", 1000).Iterator()
		for it.Next(ctx) {
			found = append(found, it.Val())
		}
		mu.Lock()
		defer mu.Unlock()
		keys[m.Options().Addr] = found
		return it.Err()
	})
	require.NoError(t, err)
	return keys
}

func keySlot(t *testing.T, c *redis.ClusterClient, key string) int64 {
	t.Helper()
	slot, err := c.ClusterKeySlot(context.Background(), key).Result()
	require.NoError(t, err)
	return slot
}

func (ct *clusterTest) exactWithServerTime(t *testing.T) {
	l, _ := ct.limiter(t) // no clock: the script reads each master's TIME
	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 5}}
	// 30 names land on every master.
	for i := range 30 {
		req := ratelimit.Request{Name: fmt.Sprintf("exact-%d", i), Limits: lim}
		admitted := 0
		for range 8 {
			if allow(t, l, req).Allowed {
				admitted++
			}
		}
		assert.Equal(t, 5, admitted, req.Name)
	}
}

func (ct *clusterTest) perKeySeparation(t *testing.T) {
	clock := newManualClock()
	l, _ := ct.limiter(t, ratelimit.WithClock(clock))
	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 2}}
	keys := []string{"", "alice", "bob", "carol", "dave", "erin"}
	for _, k := range keys {
		req := ratelimit.Request{Name: "sep", Key: k, Limits: lim}
		assert.True(t, allow(t, l, req).Allowed, "key %q", k)
		assert.True(t, allow(t, l, req).Allowed, "key %q", k)
		assert.False(t, allow(t, l, req).Allowed, "key %q", k)
	}
	// Another name with the same keys has its own counters.
	assert.True(t, allow(t, l, ratelimit.Request{Name: "sep2", Key: "alice", Limits: lim}).Allowed)
}

func (ct *clusterTest) multiLimitDenialChargesNothing(t *testing.T) {
	for _, limits := range mixedLimits() {
		t.Run(string(limits[1].AlgorithmOrDefault()), func(t *testing.T) {
			clock := newManualClock()
			l, c := ct.limiter(t, ratelimit.WithClock(clock))
			req := ratelimit.Request{Name: "multi", Key: "k", Limits: limits}
			assert.True(t, allow(t, l, req).Allowed)
			assert.True(t, allow(t, l, req).Allowed)
			d := allow(t, l, req) // one script run with both keys: no CROSSSLOT
			assert.False(t, d.Allowed)
			assert.Equal(t, 0, d.LimitIndex, "the per-second limit denies")
			if limits[1].AlgorithmOrDefault() == ratelimit.SlidingLog {
				// Both logs hold the two admitted calls only.
				for i := range limits {
					n, err := c.LLen(context.Background(), l.Key("multi", "k", i, limits[i].Algorithm)).Result()
					require.NoError(t, err)
					assert.EqualValues(t, 2, n, "log of limit %d", i)
				}
			}
			// Had the denial charged the hourly limit, it would deny now.
			clock.Advance(time.Second)
			assert.True(t, allow(t, l, req).Allowed)
			d = allow(t, l, req)
			assert.False(t, d.Allowed)
			assert.Equal(t, 1, d.LimitIndex, "the hourly limit denies")
		})
	}
}

// sameDecisionsAsSingleServer decides one sequence of calls, for every
// algorithm alone and mixed with SlidingLog, on the cluster and on the
// package's single server, and wants the same decisions from both.
func (ct *clusterTest) sameDecisionsAsSingleServer(t *testing.T) {
	type call struct {
		at   time.Duration
		key  string
		cost int64
	}
	var calls []call
	for _, at := range []time.Duration{0, 0, 0, 0, 0, 0, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 10 * time.Second, 31 * time.Second} {
		for _, key := range []string{"a", "b"} {
			calls = append(calls, call{at: at, key: key, cost: 1})
		}
	}
	calls = append(calls, call{at: 31 * time.Second, key: "a", cost: 2}, call{at: 40 * time.Second, key: "b", cost: 2})

	cases := map[string][]ratelimit.Limit{}
	for _, alg := range clusterAlgorithms() {
		cases[string(alg)] = []ratelimit.Limit{{Period: 10 * time.Second, Threshold: 3, Algorithm: alg}}
	}
	for _, limits := range mixedLimits() {
		cases["sliding_log+"+string(limits[1].AlgorithmOrDefault())] = limits
	}
	for name, limits := range cases {
		t.Run(name, func(t *testing.T) {
			clock := newManualClock()
			start := clock.Now()
			// A prefix of its own instead of a FLUSHALL of the shared server.
			prefix := WithPrefix(fmt.Sprintf("clustertest:%s:%d:", name, time.Now().UnixNano()))
			single := New(rdb(t), prefix, ratelimit.WithClock(clock))
			clustered, _ := ct.limiter(t, prefix, ratelimit.WithClock(clock))
			admittedAtStart, deniedAtStart := 0, 0
			for i, c := range calls {
				clock.Set(start.Add(c.at))
				req := ratelimit.Request{Name: "diff", Key: c.key, Cost: c.cost, Limits: limits}
				want := allow(t, single, req)
				got := allow(t, clustered, req)
				require.Equal(t, want, got, "call %d (%+v)", i, c)
				if c.at == 0 && c.key == "a" {
					if got.Allowed {
						admittedAtStart++
					} else {
						deniedAtStart++
					}
				}
			}
			// Six calls in one instant against a threshold of three: some
			// are admitted, some denied.
			assert.NotZero(t, admittedAtStart)
			assert.NotZero(t, deniedAtStart)
		})
	}
}

func (ct *clusterTest) keysOfOneCallShareASlot(t *testing.T) {
	for _, limits := range mixedLimits() {
		t.Run(string(limits[1].AlgorithmOrDefault()), func(t *testing.T) {
			l, c := ct.limiter(t, ratelimit.WithClock(newManualClock()))
			require.True(t, allow(t, l, ratelimit.Request{Name: "svc.Get", Key: "user-7", Limits: limits}).Allowed)

			byMaster := keysByMaster(t, c)
			var holders []string
			var keys []string
			for addr, ks := range byMaster {
				if len(ks) > 0 {
					holders = append(holders, addr)
					keys = append(keys, ks...)
				}
			}
			require.Len(t, holders, 1, "keys of one call on several masters: %v", byMaster)
			want := keySlot(t, c, l.Key("svc.Get", "user-7", 0, ratelimit.SlidingLog))
			tag := l.Key("svc.Get", "user-7", 0, ratelimit.SlidingLog)
			tag = tag[:strings.IndexByte(tag, '}')+2] // ratelimit:{svc.Get:user-7}:
			for _, k := range keys {
				assert.True(t, strings.HasPrefix(k, tag), "key %q", k)
				assert.Equal(t, want, keySlot(t, c, k), "slot of %q", k)
			}
			if limits[1].AlgorithmOrDefault() == ratelimit.SlidingLog {
				assert.ElementsMatch(t, []string{l.Key("svc.Get", "user-7", 0, ratelimit.SlidingLog), l.Key("svc.Get", "user-7", 1, ratelimit.SlidingLog)}, keys)
			}
		})
	}
}

func (ct *clusterTest) keysSpreadOverMasters(t *testing.T) {
	const n = 200
	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 1}}
	spread := func(t *testing.T, req func(i int) ratelimit.Request) {
		l, c := ct.limiter(t, ratelimit.WithClock(newManualClock()))
		for i := range n {
			require.True(t, allow(t, l, req(i)).Allowed)
		}
		byMaster := keysByMaster(t, c)
		require.Len(t, byMaster, 3)
		total := 0
		slots := map[int64]bool{}
		for addr, keys := range byMaster {
			assert.NotEmpty(t, keys, "master %s holds no key", addr)
			total += len(keys)
			for _, k := range keys {
				slots[keySlot(t, c, k)] = true
			}
		}
		assert.Equal(t, n, total)
		// 200 keys hashed into 16384 slots rarely share one.
		assert.Greater(t, len(slots), n*9/10, "distinct slots")
	}
	t.Run("Names", func(t *testing.T) {
		spread(t, func(i int) ratelimit.Request {
			return ratelimit.Request{Name: fmt.Sprintf("example.com/svc.Store.Method%d", i), Limits: lim}
		})
	})
	t.Run("Keys", func(t *testing.T) {
		spread(t, func(i int) ratelimit.Request {
			return ratelimit.Request{Name: "example.com/svc.Store.Get", Key: fmt.Sprintf("user-%d", i), Limits: lim}
		})
	})
}

func (ct *clusterTest) hostileKeys(t *testing.T) {
	keys := []string{
		"", "{", "}", "{}", "}{", "{a}", "a{b}c", "{user}:1", "x}:0", ":", "::", "a:b",
		"%", "%7B", "%7b", "%25", "%%", "\x00", "a\x00b", "\x00{\x00}", "\n", "\r\n",
		"{\n}", "\x7f", "é{ü}", strings.Repeat("{", 100),
	}
	names := []string{"svc.Get", "svc.{Get}", "}svc:{", "svc%7BGet%7D"}
	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 2}, {Period: time.Hour, Threshold: 5}}
	l, c := ct.limiter(t, ratelimit.WithClock(newManualClock()))
	for _, name := range names {
		for _, k := range keys {
			req := ratelimit.Request{Name: name, Key: k, Limits: lim}
			// allow fails on any error, such as CROSSSLOT or MOVED.
			assert.True(t, allow(t, l, req).Allowed, "name %q key %q", name, k)
			assert.True(t, allow(t, l, req).Allowed, "name %q key %q", name, k)
			assert.False(t, allow(t, l, req).Allowed, "name %q key %q", name, k)
		}
	}
	total := 0
	for _, ks := range keysByMaster(t, c) {
		total += len(ks)
	}
	assert.Equal(t, len(names)*len(keys)*len(lim), total, "one key per name, key and limit")
}

// masterDown kills one master: calls whose keys it held fail with
// ErrBackend, calls on the other masters are still decided.
func (ct *clusterTest) masterDown(t *testing.T) {
	ct.cluster.Flush(t)
	addrs := ct.cluster.Addrs()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:         addrs,
		DialTimeout:   10 * time.Second, // the killed master refuses at once
		ReadTimeout:   10 * time.Second,
		WriteTimeout:  10 * time.Second,
		DialerRetries: 1,
		MaxRedirects:  2,
	})
	t.Cleanup(func() { c.Close() })
	l := newTest(c, withoutHeartbeat())
	ctx := context.Background()

	// Find a name whose keys each master holds.
	slots, err := c.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	owner := func(slot int64) string {
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) {
				return s.Nodes[0].Addr
			}
		}
		t.Fatalf("slot %d has no owner in %v", slot, slots)
		return ""
	}
	nameOn := map[string]string{} // master address -> name
	for i := 0; len(nameOn) < len(addrs); i++ {
		require.Less(t, i, 1000, "no names found on every master: %v", nameOn)
		name := fmt.Sprintf("down-%d", i)
		addr := owner(keySlot(t, c, l.Key(name, "", 0, ratelimit.SlidingLog)))
		if _, ok := nameOn[addr]; !ok {
			nameOn[addr] = name
		}
	}
	require.ElementsMatch(t, addrs, keysOf(nameOn))

	lim := []ratelimit.Limit{{Period: time.Minute, Threshold: 100}, {Period: time.Hour, Threshold: 1000}}
	for _, name := range nameOn {
		require.True(t, allow(t, l, ratelimit.Request{Name: name, Limits: lim}).Allowed, name)
	}

	victim := addrs[0]
	ct.cluster.Kill(0)
	check := func(t *testing.T) {
		for addr, name := range nameOn {
			req := ratelimit.Request{Name: name, Limits: lim}
			if addr != victim {
				assert.True(t, allow(t, l, req).Allowed, "name %s on live master %s", name, addr)
				continue
			}
			_, err := l.Allow(ctx, req)
			require.Error(t, err, "name %s on dead master %s", name, addr)
			assert.True(t, errors.Is(err, ratelimit.ErrBackend), "%v", err)
			var be *ratelimit.BackendError
			require.ErrorAs(t, err, &be)
			assert.Equal(t, name, be.Name)
		}
	}
	t.Run("AtOnce", check)

	// Once the survivors mark the master failed, they keep serving their
	// own slots (cluster-require-full-coverage no), and the client follows.
	survivor := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer survivor.Close()
	require.Eventually(t, func() bool {
		nodes, err := survivor.ClusterNodes(ctx).Result()
		if err != nil {
			return false
		}
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) > 2 && strings.HasPrefix(f[1], victim+"@") && strings.Contains(f[2], "fail") && !strings.Contains(f[2], "fail?") {
				return true
			}
		}
		return false
	}, 2*time.Minute, 50*time.Millisecond, "survivors never marked %s failed", victim)
	t.Run("AfterFailureDetected", check)
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// reserveAcrossSlots: Reserve of a request with a key per limit whose
// keys are on several hash tags (several masters), on the masters' own
// clocks, decides all or nothing (a call the second line denies charges
// neither), and returns one time at which Adjust finds every limit's
// charge: a refund of all the call took at that time leaves every key as
// fresh, for a sliding log (which refunds the entries logged at that
// time) and a fixed window.
func (ct *clusterTest) reserveAcrossSlots(t *testing.T) {
	ctx := context.Background()
	l, c := ct.limiter(t) // no clock: each master's TIME
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow} {
		lim := ratelimit.Limit{Algorithm: alg, Period: time.Hour, Threshold: 10}
		keys := []string{"ann", "acme"}
		name := "reserve-slots-" + string(alg)
		require.NotEqual(t, keySlot(t, c, l.Key(name, keys[0], 0, alg)), keySlot(t, c, l.Key(name, keys[1], 1, alg)), "the keys share a slot")
		req := ratelimit.Request{Name: name, Cost: 3, Keys: keys, Limits: []ratelimit.Limit{lim, lim}}
		remaining := func(i int) int64 {
			probe := ratelimit.Request{Name: name, Cost: 1, Keys: []string{"fresh 0", "fresh 1"}, Limits: req.Limits}
			probe.Keys[i] = keys[i]
			d, err := l.Peek(ctx, probe)
			require.NoError(t, err)
			return d.Remaining
		}
		d, at, err := l.Reserve(ctx, req)
		require.NoError(t, err, "%s: no CROSSSLOT", alg)
		require.True(t, d.Allowed)
		for i := range keys {
			require.EqualValues(t, 10-3, remaining(i), "%s: limit %d charged", alg, i)
		}
		require.NoError(t, l.Adjust(ctx, req, at, -3))
		for i := range keys {
			require.EqualValues(t, 10, remaining(i), "%s: limit %d refunded at the time Reserve told", alg, i)
		}
		// The second line denies: the first is not charged.
		full := ratelimit.Request{Name: name, Cost: 10, Keys: []string{"fresh", keys[1]}, Limits: req.Limits}
		d, _, err = l.Reserve(ctx, full)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		d, _, err = l.Reserve(ctx, req)
		require.NoError(t, err)
		require.False(t, d.Allowed)
		require.Equal(t, 1, d.LimitIndex)
		require.EqualValues(t, 10, remaining(0), "%s: a denied call charges no line", alg)
	}
}
