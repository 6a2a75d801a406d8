package guard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// The tests of this file pin the bounds a lease relies on to never admit
// past what the backend charged: a world's calls go through a lease
// guard over a memory limiter on a manual clock, each admitted one is
// asked again at its time of an oracle (a memory limiter without leases
// on a clock of its own), and once the guard is closed the units the
// backend still admits are counted against those the oracle admits.

// perUser is an exact line of one call an hour per user, whatever its
// cost: a call of a user whose line is full takes nothing from the lease
// (all or nothing), so a lease can be taken with no call using it.
var perUser = ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 1, PerCall: true}

// world is a lease guard over a backend on a manual clock, and the
// oracle that decides the leased line's admitted calls exactly.
type world struct {
	t             *testing.T
	lim           ratelimit.Limit // the leased line
	clock, oclock *clocktest.Manual
	m, oracle     *ratelimit.MemoryLimiter
	g             *guard.Leases
}

// newWorld returns a world leasing lim over a memory limiter, which wrap
// (nil: none) makes the guard's backend.
func newWorld(t *testing.T, lim ratelimit.Limit, wrap func(*ratelimit.MemoryLimiter) ratelimit.Limiter) *world {
	w := &world{t: t, lim: lim, clock: clocktest.NewManual(), oclock: clocktest.NewManual()}
	w.m, w.oracle = ratelimit.NewMemory(ratelimit.WithClock(w.clock)), ratelimit.NewMemory(ratelimit.WithClock(w.oclock))
	var backend ratelimit.Limiter = w.m
	if wrap != nil {
		backend = wrap(w.m)
	}
	w.g = guard.NewLeases(backend)
	t.Cleanup(w.g.Close)
	return w
}

// advance moves both clocks on by d.
func (w *world) advance(d time.Duration) {
	w.clock.Advance(d)
	w.oclock.Advance(d)
}

// exact is the leased line, leasing nothing.
func (w *world) exact(cost int64) ratelimit.Request {
	lim := w.lim
	lim.Prefetch = 0
	return ratelimit.Request{Name: "hot", Cost: cost, Limits: []ratelimit.Limit{lim}}
}

// call asks the guard for a call of cost units of the leased line alone,
// or, for a user, of it and the user's line; the oracle must admit an
// admitted one at its time.
func (w *world) call(user string, cost int64) bool {
	req := ratelimit.Request{Name: "hot", Cost: cost, Limits: []ratelimit.Limit{w.lim}}
	if user != "" {
		req.Keys, req.Limits = []string{"", user}, []ratelimit.Limit{w.lim, perUser}
	}
	d := allow(w.t, w.g, req)
	if d.Allowed {
		require.True(w.t, allow(w.t, w.oracle, w.exact(cost)).Allowed, "the oracle denies a call the guard admitted")
	}
	return d.Allowed
}

// fill fills user's line in the backend, charging no state of the leased
// line.
func (w *world) fill(user string) {
	lim := w.lim
	lim.Prefetch = 0
	req := ratelimit.Request{Name: "hot", Keys: []string{"filler", user}, Limits: []ratelimit.Limit{lim, perUser}}
	require.True(w.t, allow(w.t, w.m, req).Allowed)
}

// charge charges cost units of the leased line exactly, as another
// process would, in the backend and the oracle.
func (w *world) charge(cost int64) {
	require.True(w.t, allow(w.t, w.m, w.exact(cost)).Allowed)
	require.True(w.t, allow(w.t, w.oracle, w.exact(cost)).Allowed)
}

// drain counts the calls of 1 unit of the leased line that the backend
// (got) and the oracle (want) admit now, asked of them directly.
func (w *world) drain() (got, want int) {
	count := func(l ratelimit.Limiter) int {
		n := 0
		for n < 1000 && allow(w.t, l, w.exact(1)).Allowed {
			n++
		}
		return n
	}
	return count(w.m), count(w.oracle)
}

// bucket7per3s is a bucket of 14 refilled 7 per 3s, an emission interval
// of 428,571.43µs, leased by a second.
var bucket7per3s = ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Period: 3 * time.Second, Threshold: 7, Burst: 14, Prefetch: time.Second}

// TestLeaseBucketPadCoversALateCall: a bucket lease that a call took but
// did not use (another line denied it) admits a call late in its life,
// whose own charge would find refill the lease's took at its start: the
// lease's end keeps the refill since then rounded up to whole units, its
// backlog a lower bound, so the bucket then admits exactly what the
// call's own charge leaves, never one more.
func TestLeaseBucketPadCoversALateCall(t *testing.T) {
	for _, c := range []lateCall{
		{name: "a part of an interval late", late: 100 * time.Millisecond},
		{name: "over an interval late", late: 500 * time.Millisecond},
		{name: "a backlog of less than an interval", pre: 428 * time.Millisecond, late: 100 * time.Millisecond},
		{name: "the lease renewed", renew: true, late: 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, want := c.run(t)
			require.Equal(t, 12, want, "the oracle")
			require.Equal(t, 12, got, "the bucket after the lease")
		})
	}
}

// lateCall is a call of bob's, of 2 units, late in the life of a lease
// of bucket7per3s that a call of ann's took, which ann's line denied.
type lateCall struct {
	name  string
	pre   time.Duration // a unit charged that long before the lease (571µs of backlog for 428ms)
	renew bool          // a lease of ann's call ended unused at its deadline before it
	late  time.Duration // bob's call, after the lease was taken
}

// run makes the calls, closes the guard and, 400ms after bob's call,
// counts what the backend and the oracle admit (see world.drain).
func (c lateCall) run(t *testing.T) (got, want int) {
	w := newWorld(t, bucket7per3s, nil)
	w.fill("ann")
	if c.pre > 0 {
		w.charge(1)
		w.advance(c.pre)
	}
	if c.renew {
		require.False(t, w.call("ann", 2))
		w.advance(bucket7per3s.Prefetch)
	}
	require.False(t, w.call("ann", 2), "ann's line is full")
	require.Positive(t, w.g.Held("hot", ""), "ann's call took a lease, and nothing from it")
	w.advance(c.late)
	require.True(t, w.call("bob", 2))
	w.g.Close()
	w.advance(400 * time.Millisecond)
	return w.drain()
}

// TestLeaseBucketKeepsThePadOfItsLastCall: a bucket lease whose last call
// came after the bucket would have refilled keeps charged, when it ends,
// the units used and the refill since its start rounded up (2 + 2 of 7),
// so that 0.9s after its start (2.1 intervals) the bucket admits 12, and
// never more than the 13 the calls' own charges leave.
func TestLeaseBucketKeepsThePadOfItsLastCall(t *testing.T) {
	w := newWorld(t, bucket7per3s, nil)
	require.True(t, w.call("", 1))
	w.advance(500 * time.Millisecond) // 1.17 intervals: a pad of 2
	require.True(t, w.call("", 1))
	require.EqualValues(t, 7-2-2, w.g.Held("hot", ""))
	w.g.Close()
	w.advance(400 * time.Millisecond)
	got, want := w.drain()
	require.Equal(t, 13, want, "the oracle")
	require.Equal(t, 14-4+2, got, "the bucket after the lease: 4 kept, 2 intervals refilled")
}

// TestLeaseWindowAdmitsOnlyInItsWindow: a window lease taken 100ms before
// its window ends admits no call at the window's end, which takes a lease
// of the next window: half a second on, a fixed window admits exactly as
// many more as the oracle's (9), a sliding window 6, as the first lease's
// unused units, refunded after its window, still weigh (under-admission
// only), never the oracle's 8 or more.
func TestLeaseWindowAdmitsOnlyInItsWindow(t *testing.T) {
	for _, c := range []struct {
		alg       ratelimit.Algorithm
		got, want int
	}{{ratelimit.FixedWindow, 9, 9}, {ratelimit.SlidingWindow, 6, 8}} {
		t.Run(string(c.alg), func(t *testing.T) {
			lim := ratelimit.Limit{Algorithm: c.alg, Period: time.Second, Threshold: 10, Prefetch: time.Minute}
			w := newWorld(t, lim, nil) // the clock starts at a whole second
			w.advance(900 * time.Millisecond)
			require.True(t, w.call("", 1))
			w.advance(100 * time.Millisecond)
			require.True(t, w.call("", 1))
			leases, _ := w.g.Stats()
			require.EqualValues(t, 2, leases, "the call at the window's end took a lease of the next window")
			w.g.Close()
			w.advance(500 * time.Millisecond)
			got, want := w.drain()
			require.Equal(t, c.want, want, "the oracle")
			require.Equal(t, c.got, got, "the window after the leases")
		})
	}
}

// TestLeaseEndsWhenItsLimitChanges: a lease taken under a limit of 100
// admits no call of the line under a limit of 5: the line's calls under
// it are admitted exactly 4 times beside the one the lease admitted.
func TestLeaseEndsWhenItsLimitChanges(t *testing.T) {
	lim := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 100, Prefetch: time.Minute}
	w := newWorld(t, lim, nil)
	require.True(t, w.call("", 1))
	require.Positive(t, w.g.Held("hot", ""))
	w.lim.Threshold = 5
	n := 0
	for n < 100 && w.call("", 1) {
		n++
	}
	require.Equal(t, 4, n, "the calls admitted under the limit of 5")
}

// plainReserver is the memory limiter as a backend that takes
// reservations but holds none (no ratelimit.OpReserveHeld), whose Adjust
// fails to charge more when failUp is set.
type plainReserver struct {
	m      *ratelimit.MemoryLimiter
	failUp bool
}

// Allow, Config, Reserve and Adjust are the memory limiter's.
func (p plainReserver) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return p.m.Allow(ctx, req)
}

func (p plainReserver) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	h := ratelimit.Handlers{Reserve: p.Reserve, Adjust: p.Adjust}
	return h.Do(ctx, p, &op)
}

func (p plainReserver) Abilities() ratelimit.Abilities {
	return ratelimit.Abilities{Ops: ratelimit.OpsOf(ratelimit.OpReserve, ratelimit.OpAdjust), Config: p.m.Abilities().Config}
}

func (p plainReserver) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	return p.m.Reserve(ctx, req)
}

func (p plainReserver) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if p.failUp && delta > 0 {
		return errRelog
	}
	return p.m.Adjust(ctx, req, at, delta)
}

// errRelog is the failure of a charge on top.
var errRelog = errors.New("charging on top failed")

// heldRelogFails is the memory limiter, a ratelimit.OpReserveHeld, whose
// Adjust fails to charge more.
type heldRelogFails struct{ *ratelimit.MemoryLimiter }

// Do adjusts with Adjust, and passes the other operations on.
func (h heldRelogFails) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	hs := ratelimit.Handlers{Next: h.MemoryLimiter, Adjust: h.Adjust}
	return hs.Do(ctx, h, &op)
}

// Adjust fails to charge more; it refunds as the memory limiter does.
func (h heldRelogFails) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if delta > 0 {
		return errRelog
	}
	return h.MemoryLimiter.Adjust(ctx, req, at, delta)
}

// logOf10 is a sliding log of 10 a second, leased by a minute: a lease
// lasts a quarter period.
var logOf10 = ratelimit.Limit{Algorithm: ratelimit.SlidingLog, Period: time.Second, Threshold: 10, Prefetch: time.Minute}

// TestLeasePlainLogRelogsItsCalls: the leases of a sliding log charged
// plain log again, when they end (renewed, then closed), the units their
// calls used at the end's time: 1.1s after the first, the 4 used at
// 250ms still weigh, and the log admits 6 (the calls' own, 7), not more.
func TestLeasePlainLogRelogsItsCalls(t *testing.T) {
	w := newWorld(t, logOf10, func(m *ratelimit.MemoryLimiter) ratelimit.Limiter { return plainReserver{m: m} })
	require.True(t, w.call("", 1))
	w.advance(200 * time.Millisecond)
	require.True(t, w.call("", 2))
	w.advance(50 * time.Millisecond)
	require.True(t, w.call("", 1))
	leases, _ := w.g.Stats()
	require.EqualValues(t, 2, leases, "a quarter period on, the call renewed the lease")
	w.g.Close()
	w.advance(850 * time.Millisecond)
	got, want := w.drain()
	require.Equal(t, 7, want, "the oracle")
	require.Equal(t, 6, got, "the log after the leases")
}

// TestLeaseLogKeepsItsCallsWhenTheRelogFails: a sliding log's lease whose
// end fails to log again its 3 used units keeps them charged at its time,
// held or plain: refunding only what no call used, the log admits at
// most what the calls' own charges leave.
func TestLeaseLogKeepsItsCallsWhenTheRelogFails(t *testing.T) {
	for _, c := range []struct {
		name      string
		wrap      func(*ratelimit.MemoryLimiter) ratelimit.Limiter
		after     time.Duration // the count, after the lease
		want, got int
	}{
		// The held charge keeps 3 units for hold + period.
		{"held", func(m *ratelimit.MemoryLimiter) ratelimit.Limiter { return heldRelogFails{m} }, 1100 * time.Millisecond, 8, 7},
		// The plain charge keeps its 5 units for a period.
		{"plain", func(m *ratelimit.MemoryLimiter) ratelimit.Limiter { return plainReserver{m: m, failUp: true} }, 500 * time.Millisecond, 7, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, logOf10, c.wrap)
			require.True(t, w.call("", 1))
			w.advance(200 * time.Millisecond)
			require.True(t, w.call("", 2))
			w.g.Close()
			w.advance(c.after - 200*time.Millisecond)
			got, want := w.drain()
			require.Equal(t, c.want, want, "the oracle")
			require.Equal(t, c.got, got, "the log after the lease")
		})
	}
}

// TestLeaseHeldLogCoversItsCallsIfItNeverEnds: a sliding log's lease
// charged held weighs until a period after the last call it can admit
// (its hold, its life, past a period), even when it never ends (the
// process died): 1.15s after it, its 5 units still weigh, where its
// calls' own 2 at 200ms do.
func TestLeaseHeldLogCoversItsCallsIfItNeverEnds(t *testing.T) {
	w := newWorld(t, logOf10, nil)
	require.True(t, w.call("", 1))
	w.advance(200 * time.Millisecond)
	require.True(t, w.call("", 2))
	w.advance(950 * time.Millisecond) // the lease never ends
	got, want := w.drain()
	require.Equal(t, 8, want, "the oracle")
	require.Equal(t, 5, got, "the log beside the lease")
}
