package redislimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// saasLine returns two rules sharing one line, a fixed window of limit
// per minute under FailLocal (the SaaS case of issue 34: a plan's line
// that every method of a service shares), and the line's Redis key.
func saasLine(l *Limiter, limit int64) ([]*ratelimit.Rule, string) {
	line := []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Minute, Threshold: limit}}
	rules := []*ratelimit.Rule{
		{Name: "svc.Get", Limits: line, KeyExprs: []string{""}, Shared: []string{"saas"}, OnError: ratelimit.FailLocal},
		{Name: "svc.Put", Limits: line, KeyExprs: []string{""}, Shared: []string{"saas"}, OnError: ratelimit.FailLocal},
	}
	return rules, l.Key("saas", "", 0, ratelimit.FixedWindow)
}

// awaitRoom waits until the current window of period, on the process's
// clock (the server's, on this machine), has room left for a test that
// must stay in one window.
func awaitRoom(t *testing.T, period, room time.Duration) {
	t.Helper()
	if left := period - time.Duration(time.Now().UnixNano())%period; left < room {
		t.Logf("waiting %v for the next window", left)
		time.Sleep(left + 10*time.Millisecond)
	}
}

// lineCount reads the count a fixed window's key holds (0 when absent).
func lineCount(t *testing.T, s *redistest.Server, key string) int64 {
	t.Helper()
	v, err := adminClient(t, s.Addr).Get(context.Background(), key).Result()
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	return n
}

// TestLedgerRefillsALineAfterFlushAll: three processes (each a limiter
// on a client of its own, counting a fleet of 3) fill a shared line of
// 100 a minute through Redis; FLUSHALL empties Redis, opening no breaker;
// within a mark's period each process finds its mark gone and charges Redis again what it had admitted, so the line holds
// 100 again and the next call is denied.
func TestLedgerRefillsALineAfterFlushAll(t *testing.T) {
	s, ls := fleetOf(t, 3)
	const limit = 100
	rules, key := saasLine(ls[0], limit)
	ctx := context.Background()
	awaitRoom(t, time.Minute, 20*time.Second)
	for i := range limit {
		a, err := rules[i%2].Admit(ctx, ls[i%3], 1, "")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceBackend, a.Decision.Source)
	}
	require.EqualValues(t, limit, lineCount(t, s, key))

	require.NoError(t, adminClient(t, s.Addr).FlushAll(ctx).Err())
	flushed := time.Now()
	require.Eventually(t, func() bool { return lineCount(t, s, key) == limit }, 30*time.Second, time.Millisecond, "the ledgers refill the line")
	t.Logf("the line held %d again %v after FLUSHALL", limit, time.Since(flushed))
	var charged int64
	for i, l := range ls {
		require.Eventually(t, func() bool { n, _, _ := l.fallback.Restored(); return n == 1 }, 30*time.Second, time.Millisecond)
		losses, c, dropped := l.fallback.Restored()
		t.Logf("process %d: %d loss, %d units charged again, %d dropped", i, losses, c, dropped)
		charged += c
		assert.False(t, l.CircuitOpen(), "no breaker opened")
		assert.Zero(t, l.fallback.Held(), "the fallback admitted nothing")
	}
	assert.EqualValues(t, limit, charged, "each process charged what it had admitted, once")
	assert.EqualValues(t, limit, lineCount(t, s, key))
	for _, l := range ls {
		a, err := rules[0].Admit(ctx, l, 1, "")
		require.ErrorIs(t, err, ratelimit.ErrLimited, "the line is full again")
		assert.Equal(t, ratelimit.SourceBackend, a.Decision.Source)
	}
}

// TestLedgerAcrossARestart: three processes fill a shared line of 100 a
// minute through Redis; the server is killed (SIGKILL), the breakers open
// and each fallback admits a few calls, and a server is started empty on
// the same port. Each probe that finds it back finds the process's mark
// gone and charges the ledger, then the fallback's admissions, before its
// breaker closes: the minute admits at most its limit plus what the
// fallbacks admitted (docs/reliability.md, What a restart forgets), where
// without the ledgers Redis would admit the limit again less the
// fallbacks' admissions.
func TestLedgerAcrossARestart(t *testing.T) {
	s, ls := fleetOf(t, 3)
	const limit, during = 100, 5
	rules, key := saasLine(ls[0], limit)
	ctx := context.Background()
	awaitRoom(t, time.Minute, 40*time.Second)
	for i := range limit {
		require.NoError(t, rules[i%2].Check(ctx, ls[i%3], 1, ""))
	}
	addr := s.Addr
	s.Stop()
	var byFallback int64
	for i, l := range ls {
		for range during {
			a, err := rules[i%2].Admit(ctx, l, 1, "")
			if err == nil {
				require.Equal(t, ratelimit.SourceFallback, a.Decision.Source)
				byFallback++
				continue
			}
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le, "the fallback decides")
			require.Equal(t, ratelimit.SourceFallback, le.Source)
		}
		require.Eventually(t, l.CircuitOpen, time.Minute, time.Millisecond)
	}
	assert.Zero(t, byFallback, "Redis said the line was full: the fallbacks admit nothing of it")
	s2, err := redistest.StartOn(addr)
	require.NoError(t, err)
	t.Cleanup(s2.Stop)
	awaitRedis(t, ls)

	var after int64
	for i := range 30 {
		a, err := rules[i%2].Admit(ctx, ls[i%3], 1, "")
		if err == nil {
			after++
		}
		require.Equal(t, ratelimit.SourceBackend, a.Decision.Source, "call %d", i)
	}
	for i, l := range ls {
		losses, charged, dropped := l.fallback.Restored()
		carried, carriedDropped := l.fallback.Carried()
		t.Logf("process %d: %d loss, ledger %d units charged, %d dropped; fallback %d carried, %d dropped", i, losses, charged, dropped, carried, carriedDropped)
		assert.EqualValues(t, 1, losses)
	}
	total := limit + byFallback + after
	t.Logf("the minute admitted %d: %d by Redis before the kill, %d by the fallbacks, %d by Redis after the restart", total, limit, byFallback, after)
	assert.LessOrEqual(t, total, limit+byFallback, "at most the limit plus what the fallbacks admitted")
	assert.EqualValues(t, limit, lineCount(t, s2, key), "the line is full again")
}

// TestHeartbeatScriptsRenderAsGolden compares the heartbeat's scripts
// with their text under testdata/scripts (rewritten with -update); the
// fleet and ledger tests run them.
func TestHeartbeatScriptsRenderAsGolden(t *testing.T) {
	for name, text := range map[string]string{"heartbeat": heartbeatText, "mark": markText} {
		matchesGolden(t, name, text)
	}
}

// TestLedgerRefillsWhatAReplicaMissed: a process admits calls on a
// primary, and a mark after them reaches its replica; the replica is
// promoted (REPLICAOF NO ONE) while the process admits more on the old
// primary, which the new one never gets; then the old primary dies and
// the client reaches the new one. A mark finds Redis answering from
// another replication ID, and the fallback charges it what it admitted
// after the mark the new primary holds: the line counts every admission
// again and admits only what is left of its limit, where without the
// marks it would admit the missed calls a second time.
func TestLedgerRefillsWhatAReplicaMissed(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingLog} {
		t.Run(string(alg), func(t *testing.T) {
			ctx := context.Background()
			m := missedByReplica(t, alg, nil)
			require.Eventually(t, func() bool { n, _, _ := m.l.fallback.Restored(); return n == 1 }, time.Minute, time.Millisecond,
				"a mark finds Redis answering from another replication ID")
			_, charged, dropped := m.l.fallback.Restored()
			assert.EqualValues(t, m.missed, charged, "what the replica missed is charged again, no more")
			assert.Zero(t, dropped)
			var after int64
			for range m.limit {
				if err := m.rule.Check(ctx, m.l, 1, "k"); err == nil {
					after++
				} else {
					require.ErrorIs(t, err, ratelimit.ErrLimited)
				}
			}
			assert.Equal(t, m.limit-m.before-m.missed, after, "the line admits what is left of its limit")
		})
	}
}

// TestFenceHoldsCallsUntilTheReplicaIsCharged: as in
// TestLedgerRefillsWhatAReplicaMissed, but goroutines call as fast as
// they can from the moment the client switches to the new primary: the
// client's dial to another server raises its fence, which holds every
// command until the process's mark is checked there and what the
// replica missed is charged, so the line admits at most its limit, plus
// the calls already inside the client when it dialled (one per
// goroutine at most). Without the fence the new primary admits what the
// replica missed a second time before the next mark finds the loss.
func TestFenceHoldsCallsUntilTheReplicaIsCharged(t *testing.T) {
	fenceHoldsCalls(t, missedByReplica(t, ratelimit.SlidingLog, nil))
}

// TestFenceHoldsCallsOfAClientUsedBeforeNew: the same, with a client of
// one connection that reached the primary before New hooked its fence,
// so the fence never sees the primary dialled: its first dial, to the new
// primary, counts as a move all the same.
func TestFenceHoldsCallsOfAClientUsedBeforeNew(t *testing.T) {
	fenceHoldsCalls(t, missedByReplica(t, ratelimit.SlidingLog, func(o *redis.Options) *redis.Client {
		o.PoolSize = 1
		c := redis.NewClient(o)
		require.NoError(t, c.Ping(context.Background()).Err())
		return c
	}))
}

// fenceHoldsCalls has goroutines call m's line as fast as they can from
// the moment its client switched to the new primary, and checks that the
// fence found the loss and the line admitted at most its limit, plus the
// calls inside the client when it dialled.
func fenceHoldsCalls(t *testing.T, m missed) {
	const goroutines = 8
	var admitted, decided atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for decided.Load() < 4*m.limit {
				_, err := m.rule.Admit(context.Background(), m.l, 1, "k")
				if err == nil {
					admitted.Add(1)
				}
				var le *ratelimit.LimitError
				if err == nil || errors.As(err, &le) {
					decided.Add(1)
				}
			}
		})
	}
	wg.Wait()
	n, _, _ := m.l.fallback.Restored()
	assert.EqualValues(t, 1, n, "the fence's check found the loss")
	total := m.before + m.missed + admitted.Load()
	t.Logf("the line admitted %d: %d before the promotion, %d the replica missed, %d after the switch", total, m.before, m.missed, admitted.Load())
	assert.LessOrEqual(t, total, m.limit+goroutines, "at most the limit, and the calls inside the client when it dialled")
}

// missed is a line of limit an hour whose new primary missed the last
// missed of the before+missed calls the limiter l admitted.
type missed struct {
	l                     *Limiter
	rule                  *ratelimit.Rule
	limit, before, missed int64
}

// missedByReplica admits before calls of a line of alg on a primary,
// waits until a mark after them and the calls reached its replica,
// promotes the replica, admits missed calls more on the old primary,
// points the limiter's client at the new primary and stops the old one.
// newClient makes the client from its options (nil: redis.NewClient).
func missedByReplica(t *testing.T, alg ratelimit.Algorithm, newClient func(*redis.Options) *redis.Client) missed {
	ctx := context.Background()
	m := missed{limit: 100, before: 40, missed: 30}
	primary, replica := replicated(t)
	var target atomic.Value
	target.Store(primary.Addr)
	if newClient == nil {
		newClient = redis.NewClient
	}
	client := newClient(&redis.Options{Addr: primary.Addr, Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, target.Load().(string))
	}})
	t.Cleanup(func() { client.Close() })
	m.l = New(client)
	t.Cleanup(func() { m.l.Close() })
	m.rule = &ratelimit.Rule{Name: "line", Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: m.limit}}}
	awaitRoom(t, time.Hour, time.Minute)
	for range m.before {
		require.NoError(t, m.rule.Check(ctx, m.l, 1, "k"))
	}
	awaitMarks(t, adminClient(t, primary.Addr), 2)
	require.NoError(t, adminClient(t, primary.Addr).Do(ctx, "WAIT", 1, 30000).Err())
	require.NoError(t, adminClient(t, replica.Addr).SlaveOf(ctx, "NO", "ONE").Err())
	for range m.missed {
		a, err := m.rule.Admit(ctx, m.l, 1, "k")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceBackend, a.Decision.Source, "the old primary admits it")
	}
	target.Store(replica.Addr)
	primary.Stop()
	return m
}

// replicated starts a primary and a replica of it, and waits until the
// replica's link is up.
func replicated(t *testing.T) (primary, replica *redistest.Server) {
	t.Helper()
	primary, err := redistest.Start("repl-diskless-sync-delay 0") // a replica syncs at once
	require.NoError(t, err)
	t.Cleanup(primary.Stop)
	host, port, err := net.SplitHostPort(primary.Addr)
	require.NoError(t, err)
	replica, err = redistest.Start("replicaof " + host + " " + port)
	require.NoError(t, err)
	t.Cleanup(replica.Stop)
	require.Eventually(t, func() bool {
		info, err := adminClient(t, replica.Addr).Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	}, time.Minute, 10*time.Millisecond, "the replica's link is up")
	return primary, replica
}

// awaitMarks waits until the one process's mark on admin's server has
// been written n times more.
func awaitMarks(t *testing.T, admin *redis.Client, n int64) {
	t.Helper()
	read := func() int64 {
		keys, err := admin.Keys(context.Background(), "*{processes}:mark:*").Result()
		require.NoError(t, err)
		require.Len(t, keys, 1)
		v, err := admin.Get(context.Background(), keys[0]).Int64()
		require.NoError(t, err)
		return v
	}
	from := read()
	require.Eventually(t, func() bool { return read() >= from+n }, time.Minute, time.Millisecond, "the process writes its mark")
}

// ledgerRefillsAFlushedMaster: three processes, each a limiter on a
// cluster client of its own, admit calls of lines whose keys spread over
// the masters (a key per user and a line for everyone, often on two
// masters); FLUSHALL empties one master. Each process finds its mark gone
// on that master alone and charges it again what it had admitted of the
// keys it holds: each key there counts what it did before, and no key on
// another master is charged twice.
func (ct *clusterTest) ledgerRefillsAFlushedMaster(t *testing.T) {
	ctx := context.Background()
	ls := ct.fleet(t)
	limits := []ratelimit.Limit{
		{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 50},
		{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1000},
	}
	c := ct.client(t)
	type line struct{ name, key, storage string }
	var lines []line
	awaitRoom(t, time.Hour, 30*time.Second)
	for i := range 8 {
		name, user := fmt.Sprintf("ledger-%d", i), fmt.Sprintf("u%d", i)
		req := ratelimit.Request{Name: name, Keys: []string{user, ""}, Limits: limits}
		for j := range 10 + i {
			require.True(t, allow(t, ls[j%3], req).Allowed)
		}
		lines = append(lines, line{name, user, ls[0].Key(name, user, 0, ratelimit.FixedWindow)}, line{name, "", ls[0].Key(name, "", 1, ratelimit.FixedWindow)})
	}
	before := map[string]int64{}
	byMaster := map[string][]string{}
	for _, ln := range lines {
		n, err := c.Get(ctx, ln.storage).Int64()
		require.NoError(t, err)
		before[ln.storage] = n
		m, err := c.MasterForKey(ctx, ln.storage)
		require.NoError(t, err)
		byMaster[m.Options().Addr] = append(byMaster[m.Options().Addr], ln.storage)
	}
	victim, err := c.MasterForKey(ctx, lines[0].storage)
	require.NoError(t, err)
	lost := byMaster[victim.Options().Addr]
	require.Less(t, len(lost), len(lines), "the keys lie on several masters")
	var want int64
	for _, k := range lost {
		want += before[k]
	}

	require.NoError(t, victim.FlushAll(ctx).Err())
	flushed := time.Now()
	count := func(k string) int64 { n, _ := c.Get(ctx, k).Int64(); return n }
	for _, k := range lost {
		require.Eventually(t, func() bool { return count(k) == before[k] }, 30*time.Second, time.Millisecond, "the ledgers refill %s", k)
	}
	t.Logf("the flushed master's %d keys held their counts again %v after FLUSHALL", len(lost), time.Since(flushed))
	var charged int64
	for i, l := range ls {
		require.Eventually(t, func() bool { n, _, _ := l.fallback.Restored(); return n >= 1 }, 30*time.Second, time.Millisecond)
		losses, c, dropped := l.fallback.Restored()
		t.Logf("process %d: %d losses, %d units charged again, %d dropped", i, losses, c, dropped)
		charged += c
	}
	assert.Equal(t, want, charged, "each process charged the flushed master what it had admitted there, once")
	for _, ln := range lines {
		assert.Equal(t, before[ln.storage], count(ln.storage), "%s of %s", ln.key, ln.name)
	}
}

// fleet returns three limiters on the flushed cluster, each on a client
// of its own (a process), once each counts them all.
func (ct *clusterTest) fleet(t *testing.T) []*Limiter {
	ct.cluster.Flush(t)
	ls := make([]*Limiter, 3)
	for i := range ls {
		ls[i] = New(ct.client(t), WithBreaker(2, 20*time.Millisecond, 200*time.Millisecond))
	}
	for _, l := range ls {
		require.Eventually(t, func() bool { return l.fallback.Processes() == len(ls) }, 30*time.Second, 10*time.Millisecond)
	}
	return ls
}

// ledgerAcrossAMasterRestart: three processes fill lines whose keys
// spread over the masters; one master is killed (the processes' breakers
// of it open, and their fallbacks, told by Redis that its lines are full,
// admit none of them) and started again empty on its port, as the master
// of its slots. Each probe that finds it back finds the process's mark
// gone there and charges it again what the process had admitted of its
// keys before the breaker closes: its lines stay full, and no key on
// another master is charged twice.
func (ct *clusterTest) ledgerAcrossAMasterRestart(t *testing.T) {
	ctx := context.Background()
	ls := ct.fleet(t)
	const limit = 20
	lim := []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: limit}}
	rules := make([]*ratelimit.Rule, 8)
	awaitRoom(t, time.Hour, 30*time.Second)
	for i := range rules {
		rules[i] = &ratelimit.Rule{Name: fmt.Sprintf("restarted-%d", i), Limits: lim, OnError: ratelimit.FailLocal}
		for j := range limit {
			require.NoError(t, rules[i].Check(ctx, ls[j%3], 1))
		}
	}
	c := ct.client(t)
	master := func(r *ratelimit.Rule) string {
		m, err := c.MasterForKey(ctx, ls[0].Key(r.Name, "", 0, ratelimit.FixedWindow))
		require.NoError(t, err)
		return m.Options().Addr
	}
	victim := master(rules[0])
	node := slices.Index(ct.cluster.Addrs(), victim)
	var lost, kept []*ratelimit.Rule
	for _, r := range rules {
		if master(r) == victim {
			lost = append(lost, r)
		} else {
			kept = append(kept, r)
		}
	}
	require.NotEmpty(t, kept, "the lines lie on several masters")

	ct.cluster.Kill(node)
	for _, l := range ls {
		decideUntil(t, lost[0], l, ratelimit.SourceFallback)
		for !l.CircuitOpen() {
			decideUntil(t, lost[0], l, ratelimit.SourceFallback)
		}
	}
	require.NoError(t, ct.cluster.Restart(node))
	for i, l := range ls {
		decideUntil(t, lost[0], l, ratelimit.SourceBackend)
		for _, r := range lost {
			a, err := r.Admit(ctx, l, 1)
			require.ErrorIs(t, err, ratelimit.ErrLimited, "process %d: %s is full again", i, r.Name)
			assert.Equal(t, ratelimit.SourceBackend, a.Decision.Source)
		}
	}
	var charged int64
	for i, l := range ls {
		losses, c, dropped := l.fallback.Restored()
		t.Logf("process %d: %d losses, %d units charged again, %d dropped", i, losses, c, dropped)
		charged += c
	}
	assert.EqualValues(t, limit*len(lost), charged, "each process charged the restarted master what it had admitted there, once")
	for _, r := range rules {
		n, err := c.Get(ctx, ls[0].Key(r.Name, "", 0, ratelimit.FixedWindow)).Int64()
		require.NoError(t, err)
		assert.EqualValues(t, limit, n, r.Name)
	}
}

// decideUntil calls r on l, each call denied, until one is decided by
// source; it fails the test on an admission, or after a minute.
func decideUntil(t *testing.T, r *ratelimit.Rule, l *Limiter, source ratelimit.Source) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		a, err := r.Admit(context.Background(), l, 1)
		require.Error(t, err, "a full line admits nothing: admitted by %v, %+v", a.Decision.Source, a.Decision)
		var le *ratelimit.LimitError
		if errors.As(err, &le) && le.Source == source {
			return
		}
		require.True(t, time.Now().Before(deadline), "no call decided by %v within a minute: %v (%v)", source, err, a.Decision.Source)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCallsInFlightOnTheServerLeftAreShed: a call in flight on a server
// that stopped answering when the client moved to another server (a
// failover's new primary) fails as a call the client could not send:
// shed, whatever its policy, and counted toward no breaker; it says
// nothing of the server the client uses now.
func TestCallsInFlightOnTheServerLeftAreShed(t *testing.T) {
	ctx := context.Background()
	m := newMovingClient(t)
	// No heartbeat: the test's calls are the client's only commands.
	l := New(m.client, withoutHeartbeat(), WithBatching(0))
	t.Cleanup(func() { l.Close() })
	rule := &ratelimit.Rule{Name: "moved", OnError: ratelimit.FailClosed, Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}}
	require.NoError(t, rule.Check(ctx, l, 1, "k"))
	time.Sleep(2 * movingIdle) // its connection goes stale: the next call dials

	require.NoError(t, m.left.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = m.left.Signal(syscall.SIGCONT) })
	inFlight := make(chan error, 1)
	go func() { inFlight <- rule.Check(ctx, l, 1, "k") }()
	require.Eventually(t, func() bool { p := m.client.PoolStats(); return p.TotalConns > p.IdleConns }, time.Minute, time.Millisecond, "the call took a connection to the stopped server")
	m.target.Store(m.next.Addr)
	require.NoError(t, rule.Check(ctx, l, 1, "k"), "decided on the new server")
	m.left.Stop() // the call in flight there fails
	err := <-inFlight
	require.ErrorIs(t, err, ratelimit.ErrLimited, "shed: %v", err)
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, ratelimit.SourceBusy, le.Source)
	assert.NotErrorIs(t, err, ratelimit.ErrBackend)
	assert.False(t, l.CircuitOpen())
}

// TestFenceDropsWhileAMarkIsStuck: the fence holds calls on the new
// server at most fenceTimeout, though its check of the marks waits on
// the heartbeat's mark, stuck on the stopped server the client left
// until its read timeout (a minute).
func TestFenceDropsWhileAMarkIsStuck(t *testing.T) {
	ctx := context.Background()
	m := newMovingClient(t)
	l := New(m.client, WithBatching(0))
	t.Cleanup(func() { l.Close() })
	rule := &ratelimit.Rule{Name: "fenced", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}}
	require.NoError(t, rule.Check(ctx, l, 1, "k")) // the heartbeat marks within 100 ms
	require.NoError(t, m.left.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = m.left.Signal(syscall.SIGCONT) })
	require.Eventually(t, func() bool { p := m.client.PoolStats(); return p.TotalConns > p.IdleConns }, time.Minute, time.Millisecond, "a heartbeat's command waits on the stopped server")
	m.target.Store(m.next.Addr)
	time.Sleep(2 * movingIdle) // the idle connections to the stopped server are stale: the next call dials
	decided := make(chan error, 1)
	go func() { decided <- rule.Check(ctx, l, 1, "k") }()
	select {
	case err := <-decided:
		require.NoError(t, err, "decided on the new server")
	case <-time.After(30 * time.Second):
		t.Fatal("the call on the new server waited for a command stuck on the old one")
	}
}

// movingClient is a client of left that moves to next when target is
// set to its address, as a failover client does (which also drops its
// connections to the old server: here they go stale after movingIdle),
// with a read timeout no loaded machine reaches.
type movingClient struct {
	left, next *redistest.Server
	target     *atomic.Value
	client     *redis.Client
}

// movingIdle is how long a movingClient's connection stays idle.
const movingIdle = 100 * time.Millisecond

func newMovingClient(t *testing.T) movingClient {
	m := movingClient{left: startServer(t), next: startServer(t), target: &atomic.Value{}}
	m.target.Store(m.left.Addr)
	m.client = redis.NewClient(ClientOptions(&redis.Options{Addr: m.left.Addr, ReadTimeout: time.Minute, ConnMaxIdleTime: movingIdle, Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, m.target.Load().(string))
	}}))
	t.Cleanup(func() { m.client.Close() })
	return m
}

// startServer starts a redis-server of the test's own, stopped when it
// ends.
func startServer(t *testing.T) *redistest.Server {
	t.Helper()
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return s
}
