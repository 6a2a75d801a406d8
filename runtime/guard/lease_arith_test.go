package guard

import (
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// sevenPer3s is a bucket whose emission interval, 3s/7, is no whole
// number of µs (428571.43): the pad's rounding shows.
var sevenPer3s = ratelimit.Limit{Algorithm: ratelimit.TokenBucket, Period: 3 * time.Second, Threshold: 7, Burst: 14, Prefetch: 10 * time.Second}

// bucketLease returns a lease of units units of sevenPer3s taken at local
// µs 1000, with backlog emission intervals of backlog.
func bucketLease(units, backlog int64) *lease {
	const start = 1000
	return &lease{limit: sevenPer3s, bucket: true, start: start, deadline: start + sevenPer3s.Prefetch.Microseconds(), units: units, backlog: backlog}
}

// TestLeasePadRoundsUp: a bucket lease's pad at now is the refill since
// its start, in emission intervals rounded up, less its backlog: a part
// of an interval counts as a whole unit.
func TestLeasePadRoundsUp(t *testing.T) {
	for _, c := range []struct {
		since, backlog, want int64 // µs after the start; units
	}{
		{-1, 0, 0}, {0, 0, 0},
		{1, 0, 1},               // 7/3e6 of an interval: a unit
		{428_571, 0, 1},         // 2,999,997/3e6
		{428_572, 0, 2},         // 3,000,004/3e6
		{857_142, 0, 2},         // 5,999,994/3e6
		{857_143, 0, 3},         // 6,000,001/3e6
		{3_000_000, 0, 7},       // a period, exactly 7
		{3_000_001, 0, 8},       // a µs more
		{428_572, 2, 0},         // 2 of backlog
		{857_143, 2, 1},         // 3 - 2
		{3_000_000, 2, 5},       // 7 - 2
		{3_000_001, 9, 0},       // never below 0
		{30_000_001, 0, 70 + 1}, // ten periods and a µs
	} {
		l := bucketLease(7, c.backlog)
		if got := l.pad(l.start + c.since); got != c.want {
			t.Errorf("pad %dµs after the start, backlog %d: %d, want %d", c.since, c.backlog, got, c.want)
		}
	}
	window := &lease{limit: leasedWindow, start: 1000, units: 7}
	if got := window.pad(1000 + 3_000_001); got != 0 {
		t.Errorf("a window lease's pad: %d, want 0", got)
	}
}

// leasedWindow is a fixed window of 10 a second, leased by a minute.
var leasedWindow = ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 10, Prefetch: time.Minute}

// TestLeaseKeepsUsedAndLastPad: a bucket lease's end keeps charged the
// units its calls used and the pad at its last call, at most its units;
// a lease no call used keeps nothing.
func TestLeaseKeepsUsedAndLastPad(t *testing.T) {
	for _, c := range []struct {
		used, last, backlog, want int64 // last: µs after the start
	}{
		{0, 3_000_000, 0, 0},
		{2, 0, 0, 2},
		{2, 1, 0, 3},
		{2, 428_572, 0, 4},
		{3, 428_572, 1, 4},
		{5, 857_143, 0, 7}, // 5 + 3, at most the 7 held
	} {
		l := bucketLease(7, c.backlog)
		l.last.Store(l.start + c.last)
		if got := l.kept(c.used); got != c.want {
			t.Errorf("kept of %d used, last call %dµs after the start, backlog %d: %d, want %d", c.used, c.last, c.backlog, got, c.want)
		}
	}
}

// TestLeaseAdmitsWhatItHoldsLessThePad: a bucket lease of 7 units admits
// calls of cost units at now while they fit beside its pad: exactly
// (7 − pad)/cost of them, never one more; and it notes the time of the
// last, which its end keeps the pad of.
func TestLeaseAdmitsWhatItHoldsLessThePad(t *testing.T) {
	for _, c := range []struct {
		since, cost, want int64
	}{
		{0, 1, 7}, {0, 3, 2}, {0, 7, 1}, {0, 8, 0},
		{1, 1, 6}, {1, 2, 3}, {1, 3, 2},
		{428_572, 2, 2}, {428_572, 5, 1}, {428_572, 6, 0},
		{857_143, 2, 2}, {857_143, 4, 1}, {857_143, 5, 0},
		{3_000_000, 1, 0},
	} {
		l := bucketLease(7, 0)
		now := l.start + c.since
		n := int64(0)
		for n < 100 && l.admit(c.cost, now) {
			n++
		}
		if n != c.want {
			t.Errorf("%dµs after the start, calls of %d: admitted %d, want %d", c.since, c.cost, n, c.want)
		}
		if n > 0 && l.last.Load() != now {
			t.Errorf("%dµs after the start: last admission noted at %d", c.since, l.last.Load()-l.start)
		}
		if free := l.free(now); free != max(7-l.used.Load()-l.pad(now), 0) || free >= c.cost {
			t.Errorf("%dµs after the start: %d free after %d calls of %d", c.since, free, n, c.cost)
		}
	}
}

// TestLeaseAdmitsWithinItsLife: a lease admits calls from its start to
// before its deadline, none before or at it, nor once it ended.
func TestLeaseAdmitsWithinItsLife(t *testing.T) {
	l := &lease{limit: leasedWindow, start: 1000, deadline: 2000, units: 10}
	for _, c := range []struct {
		now  int64
		want bool
	}{{999, false}, {1000, true}, {1999, true}, {2000, false}, {2001, false}} {
		if got := l.admit(1, c.now); got != c.want {
			t.Errorf("a call at %d of a lease from 1000 to 2000: admitted %v", c.now, got)
		}
	}
	l.used.Store(ended)
	if l.admit(1, 1500) {
		t.Error("an ended lease admitted a call")
	}
}

// TestLeaseWindowEnd: a window lease's window ends at the next multiple
// of the period; a time on a boundary is in the window it starts.
func TestLeaseWindowEnd(t *testing.T) {
	threeS := ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: 3 * time.Second, Threshold: 7}
	for _, c := range []struct {
		at, want int64
	}{
		{0, 3_000_000}, {1, 3_000_000}, {2_999_999, 3_000_000},
		{3_000_000, 6_000_000}, {3_000_001, 6_000_000},
	} {
		if got := windowEnd(threeS, c.at); got != c.want {
			t.Errorf("windowEnd(3s, %d) = %d, want %d", c.at, got, c.want)
		}
	}
}
