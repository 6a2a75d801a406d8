package guard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// The heartbeat by which the processes sharing a backend count themselves,
// so that the local fallback gives each its share of a limit without being
// told how many there are.
const (
	// HeartbeatEvery is how often a process says it is alive and reads how
	// many are.
	HeartbeatEvery = time.Second
	// HeartbeatTTL is how long a process is counted after it last said so:
	// a process that is gone stops counting within it, and clocks may be
	// skewed by up to HeartbeatTTL-HeartbeatEvery. It is long enough that
	// a process whose beats are late (a loaded machine) is still counted:
	// a process left out would enlarge every other's share.
	HeartbeatTTL = 4 * time.Second
)

// ErrClosed is wrapped by a [Heartbeater]'s error when the backend is
// closed and nothing will answer: the heartbeat ends.
var ErrClosed = errors.New("guard: backend closed")

// Heartbeater is what a backend offers (reported in its
// [ratelimit.Abilities.ForGuards]) for the processes sharing it to count
// themselves with: each process keeps a member in the backend, renewed by
// its heartbeat, and counts the members that are live. What more it does
// for its fleet it reports ([FleetAbilities]): let its processes meet
// again after an outage (Rejoin), and tell a process which of its writes
// it lost (Mark, BeatMark).
type Heartbeater interface {
	// FleetName names the heartbeat the backend takes part in, as a
	// comparable value: the backends of one process with equal names
	// share one heartbeat and one member, and count as one process.
	FleetName() any
	// FleetAbilities reports what the backend does for its fleet beyond
	// counting it; it must not change. The guards call Rejoin only when
	// it reports Rejoins, and Mark and BeatMark only when it reports
	// Marks.
	FleetAbilities() FleetAbilities
	// Beat renews member, to be counted until ttl after now (the
	// process's clock), drops the members whose time has passed, and
	// returns how many are left.
	Beat(ctx context.Context, member string, now time.Time, ttl time.Duration) (int64, error)
	// Leave removes member, so that the others stop counting it at their
	// next beat.
	Leave(ctx context.Context, member string) error
	// Rejoin marks member back at now (the process's clock), for ttl,
	// and returns how many members were marked back at or after since:
	// the processes back since then. Only Rejoin marks a member back: a
	// heartbeat's beat does not. A backend that does not report Rejoins
	// fails it wrapping errors.ErrUnsupported.
	Rejoin(ctx context.Context, member string, now, since time.Time, ttl time.Duration) (int64, error)
	// Mark stores mark as member's and reads what it held before, one read
	// per part of the keys that answered (an error when none did); it
	// wraps errors.ErrUnsupported when the backend cannot keep marks (the
	// heartbeat then writes none again).
	Mark(ctx context.Context, member, mark string) ([]MarkRead, error)
	// BeatMark is Beat and Mark at once; its error is the beat's, or
	// Mark's wrapping errors.ErrUnsupported (the heartbeat then beats
	// with Beat).
	BeatMark(ctx context.Context, member string, now time.Time, ttl time.Duration, mark string) (int64, []MarkRead, error)
}

// FleetAbilities is what a [Heartbeater] reports it does for its fleet
// beyond counting it.
type FleetAbilities struct {
	// Rejoins says that the fleet's processes meet again after an outage
	// (Rejoin): before its breaker closes, a fallback waits until every
	// process it counted has found the backend back too, so that none
	// decides by the backend while others still spend their shares of
	// the same windows.
	Rejoins bool
	// Marks says that the backend tells a process which of its writes it
	// lost (Mark, BeatMark; see [MarkEvery]): it keeps each process's
	// latest mark for [MarkTTL], writing it in order with the process's
	// other writes; a backend of several nodes ([Probed.PerNode]) keeps a
	// mark on each node, for the part of the keys the node holds (see
	// [MarkRead]). A fallback around it that counts its fleet keeps a
	// ledger of what the backend admitted.
	Marks bool
}

// Fleet is a process's place in one heartbeat: its member, and the count
// of members it last read. The backends of one process that share a
// [Heartbeater.FleetName] share one Fleet, one heartbeat and one member.
type Fleet struct {
	name any
	id   string
	hb   Heartbeater
	can  FleetAbilities // hb's
	// count is the number of processes live at the latest beat that the
	// backend answered; 0 before any.
	count atomic.Int64
	// mu guards lowerSince: when beats began to read a count lower than
	// count (zero: they do not).
	mu         sync.Mutex
	lowerSince time.Time
	// beats counts the beats the backend answered.
	beats atomic.Int64
	// members are the joins of the heartbeat; guarded by fleets.mu.
	members map[*FleetMember]struct{}
	// marks are the process's marks (see [FleetAbilities.Marks]).
	marks marks
	// cancel stops the heartbeat, which closes done when it has ended.
	cancel context.CancelFunc
	done   chan struct{}
}

// FleetMember is one join of a heartbeat (one limiter's), until Leave.
type FleetMember struct {
	fleet  *Fleet
	paused func() bool
	// hooks are what the join is told (see onBeat); guarded by
	// fleets.mu.
	hooks fleetHooks
}

// fleets are the heartbeats running in the process, by name.
var fleets = struct {
	mu sync.Mutex
	m  map[any]*Fleet
}{m: map[any]*Fleet{}}

// JoinFleet joins the heartbeat of hb's fleet, starting it if it is the
// first join there. The heartbeat beats every [HeartbeatEvery] until the
// last join leaves, or hb's backend is closed; it skips beats while paused
// of any join reports true (a breaker that is open: the count read before
// the outage stands, and the backend is not asked); paused may be nil.
func JoinFleet(hb Heartbeater, paused func() bool) *FleetMember {
	fleets.mu.Lock()
	defer fleets.mu.Unlock()
	name := hb.FleetName()
	f := fleets.m[name]
	if f == nil {
		var b [8]byte
		_, _ = rand.Read(b[:])
		f = &Fleet{name: name, id: hex.EncodeToString(b[:]), hb: hb, can: hb.FleetAbilities(), members: map[*FleetMember]struct{}{}}
		ctx, cancel := context.WithCancel(backgroundContext())
		f.cancel, f.done = cancel, make(chan struct{})
		fleets.m[name] = f
		go f.heartbeat(ctx)
	}
	m := &FleetMember{fleet: f, paused: paused}
	f.members[m] = struct{}{}
	return m
}

// Fleet returns the heartbeat m joined.
func (m *FleetMember) Fleet() *Fleet { return m.fleet }

// Leave takes m out of its heartbeat; the last join to leave stops it,
// waits for it to end and removes the process's member from the backend
// (bounded by a second). Leave may be called more than once.
func (m *FleetMember) Leave() {
	fleets.mu.Lock()
	f := m.fleet
	if _, ok := f.members[m]; !ok {
		fleets.mu.Unlock()
		return
	}
	delete(f.members, m)
	last := len(f.members) == 0
	if last && fleets.m[f.name] == f {
		delete(fleets.m, f.name)
	}
	fleets.mu.Unlock()
	if last {
		f.cancel()
		<-f.done
	}
}

// Processes returns how many processes the heartbeat last counted, at
// least 1 (1 before the backend ever answered).
func (f *Fleet) Processes() int { return int(max(f.count.Load(), 1)) }

// Beats returns how many beats the backend answered.
func (f *Fleet) Beats() int64 { return f.beats.Load() }

// Member returns the process's member of the heartbeat.
func (f *Fleet) Member() string { return f.id }

// heartbeat beats every HeartbeatEvery, and between beats writes the
// process's mark every MarkEvery when one is due, until ctx ends (the last
// join left), then removes the process's member; or until the backend is
// closed.
func (f *Fleet) heartbeat(ctx context.Context) {
	defer close(f.done)
	var last time.Time
	for {
		if err := f.tick(ctx, &last); errors.Is(err, ErrClosed) {
			fleets.mu.Lock()
			if fleets.m[f.name] == f {
				delete(fleets.m, f.name)
			}
			fleets.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			f.remove()
			return
		case <-time.After(MarkEvery):
		}
	}
}

// tick beats when HeartbeatEvery passed since the last beat, else writes
// the process's mark when one is due; neither while paused.
func (f *Fleet) tick(ctx context.Context, last *time.Time) error {
	switch {
	case f.paused():
		return nil
	case time.Since(*last) >= HeartbeatEvery:
		*last = time.Now()
		return f.beat(ctx)
	case f.markDue():
		ctx, cancel := context.WithTimeout(ctx, HeartbeatTTL)
		defer cancel()
		_, _ = f.markNow(ctx)
	}
	return nil
}

// paused reports whether a join of the heartbeat is paused.
func (f *Fleet) paused() bool {
	fleets.mu.Lock()
	defer fleets.mu.Unlock()
	for m := range f.members {
		if m.paused != nil && m.paused() {
			return true
		}
	}
	return false
}

// remove removes the process's member, so that the others stop counting
// it at their next beat, within a second at most.
func (f *Fleet) remove() {
	ctx, cancel := context.WithTimeout(backgroundContext(), time.Second)
	defer cancel()
	_ = f.hb.Leave(ctx, f.id)
}

// beat renews the process's member and reads how many members are live,
// and tells the joins whether the backend lost its state (see beatOnce).
func (f *Fleet) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, HeartbeatTTL)
	defer cancel()
	n, lost, err := f.beatOnce(ctx)
	if err != nil {
		if len(lost) > 0 {
			f.tell(lost) // a node's mark answered, the beat's did not
		}
		return err
	}
	f.counted(max(n, 1), time.Now())
	f.beats.Add(1)
	f.tell(lost)
	return nil
}

// counted takes n, the count a beat read at now: a higher count at once, a
// lower one only once beats have read no more than it for HeartbeatTTL
// (the count held until then). A count that drops is taken slowly, since
// it enlarges every share: after a Redis restarted empty the first beats
// count only the processes that have beaten since, and a process that
// left stops being counted within HeartbeatTTL anyway.
func (f *Fleet) counted(n int64, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n >= f.count.Load() {
		f.count.Store(n)
		f.lowerSince = time.Time{}
		return
	}
	if f.lowerSince.IsZero() {
		f.lowerSince = now
	}
	if now.Sub(f.lowerSince) >= HeartbeatTTL {
		f.count.Store(n)
		f.lowerSince = time.Time{}
	}
}
