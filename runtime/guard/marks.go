package guard

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Marks: each process stores, in the backend beside its state, a mark
// that grows with each write of it (a beat, or between beats a write
// every [MarkEvery] while the process has been admitted calls). The
// backend's writes are applied in order, so a backend whose copy of the
// process's last mark is older than the one it acknowledged (or absent)
// lost every write the process made after that older mark: a restart
// without persistence or with an old snapshot, a flush, a failover to a
// replica that lacked the latest writes. A backend that answers from
// another history of writes than the last mark did (another server took
// over, or one restarted) may have lost what followed the mark it holds,
// even when that is the latest acknowledged.
const (
	// MarkEvery is how often, between beats, a process that was admitted
	// calls writes its mark: a loss is found within it while calls flow.
	MarkEvery = 100 * time.Millisecond
	// MarkTTL is how long a backend that keeps marks
	// ([FleetAbilities.Marks]) keeps a process's mark after its last
	// write: a process whose beats pause longer (a breaker open that
	// long) finds its mark gone and charges its whole ledger again.
	MarkTTL = 24 * time.Hour
)

// MarkRead is what a [Heartbeater]'s Mark read when it stored a mark.
type MarkRead struct {
	// Before is the mark it held before ("" when none).
	Before string
	// History names the history of writes it answered from (Redis: the
	// server's replication ID), which changes when another copy of the
	// state takes over or a server restarts; "" when it cannot tell.
	History string
	// Part names the part of the backend's keys the mark stands for, the
	// same across failovers ("": all of them).
	Part string
	// Node names the node that holds Part now, as [Probed.NodeOf] names
	// it ("": the backend's only one).
	Node string
}

// loss is what a mark found on a node that lost writes (node "": the
// backend's only one): the latest mark it still held (0: none), after
// which it lost them all.
type loss struct {
	node string
	kept int64
}

// marks is a fleet's state of its marks.
type marks struct {
	// mu is held while a mark is written: sent is the latest mark
	// written, parts what each part of the keys acknowledged.
	mu    sync.Mutex
	sent  int64
	parts map[string]partMarks
	// admitted is set when a call was admitted since the last mark;
	// unsupported when the backend said it cannot keep marks.
	admitted, unsupported atomic.Bool
}

// partMarks is what a part of the backend's keys acknowledged: the latest
// mark, and the history it answered from.
type partMarks struct {
	acked   int64
	history string
}

// beatOnce renews the process's member and reads how many members are
// live, and writes its mark when the backend keeps marks (see mark), in
// one round trip; it returns the losses the mark found.
func (f *Fleet) beatOnce(ctx context.Context) (int64, []loss, error) {
	if !f.marking() {
		n, err := f.hb.Beat(ctx, f.id, time.Now(), HeartbeatTTL)
		return n, nil, err
	}
	var n int64
	lost, err := f.mark(func(mark string) (reads []MarkRead, err error) {
		n, reads, err = f.hb.BeatMark(ctx, f.id, time.Now(), HeartbeatTTL, mark)
		return reads, err
	})
	if errors.Is(err, errors.ErrUnsupported) {
		n, err = f.hb.Beat(ctx, f.id, time.Now(), HeartbeatTTL)
	}
	return n, lost, err
}

// markNow writes the process's mark alone, when the backend keeps marks,
// and tells the joins of the losses it found; it reports whether it found
// one, and the backend's error.
func (f *Fleet) markNow(ctx context.Context) (bool, error) {
	if !f.marking() {
		return false, nil
	}
	lost, err := f.mark(func(mark string) ([]MarkRead, error) { return f.hb.Mark(ctx, f.id, mark) })
	if len(lost) > 0 {
		f.tell(lost)
	}
	return len(lost) > 0, err
}

// mark writes the process's next mark with write, which reads what each
// part of the keys held before, and returns the losses found: a part that
// held a mark older than the latest it acknowledged, or answered from
// another history, lost writes. Each join notes the mark first (see
// onBeat), so that its ledger knows what it had admitted before the mark
// was sent. One mark at a time; a part that did not answer is read at
// the next.
func (f *Fleet) mark(write func(mark string) ([]MarkRead, error)) ([]loss, error) {
	m := &f.marks
	m.mu.Lock()
	defer m.mu.Unlock()
	m.admitted.Store(false)
	m.sent++
	f.noteMark(m.sent)
	reads, err := write(strconv.FormatInt(m.sent, 10))
	if errors.Is(err, errors.ErrUnsupported) {
		m.unsupported.Store(true)
	}
	if err != nil {
		m.admitted.Store(true) // write it again soon
	}
	var lost []loss
	for _, r := range reads {
		if l, ok := m.read(r); ok {
			lost = append(lost, l)
		}
	}
	return lost, err
}

// read takes what a part of the keys read when it stored the latest mark
// sent, and reports what it lost, if anything.
func (m *marks) read(r MarkRead) (loss, bool) {
	if m.parts == nil {
		m.parts = map[string]partMarks{}
	}
	p := m.parts[r.Part]
	held, _ := strconv.ParseInt(r.Before, 10, 64) // 0 when none
	moved := r.History != p.history && p.history != "" && r.History != ""
	lost := p.acked > 0 && (held < p.acked || moved)
	m.parts[r.Part] = partMarks{acked: max(p.acked, m.sent), history: r.History}
	return loss{node: r.Node, kept: held}, lost
}

// admitted notes that the backend admitted a call of the process: a mark
// is written within MarkEvery. A load, and a store only once per mark.
func (f *Fleet) admitted() {
	if !f.marks.admitted.Load() {
		f.marks.admitted.Store(true)
	}
}

// markDue reports whether a mark is to be written between beats: the
// backend keeps marks and a call was admitted since the last one.
func (f *Fleet) markDue() bool { return f.marking() && f.marks.admitted.Load() }

// marking reports whether the heartbeat writes marks: the backend reports
// that it keeps them ([FleetAbilities.Marks]) and has not said since that
// it cannot.
func (f *Fleet) marking() bool { return f.can.Marks && !f.marks.unsupported.Load() }

// noteMark tells each join of the heartbeat that mark is about to be sent.
func (f *Fleet) noteMark(mark int64) {
	for _, j := range f.joins() {
		if j.marking != nil {
			j.marking(mark)
		}
	}
}

// tell tells each join of the heartbeat that the backend answered a beat
// or a mark, and the losses the mark found, outside the lock of the
// fleets.
func (f *Fleet) tell(lost []loss) {
	for _, j := range f.joins() {
		if j.beaten != nil {
			j.beaten(lost)
		}
	}
}

// joins returns the joins' hooks, read under the lock of the fleets.
func (f *Fleet) joins() []fleetHooks {
	fleets.mu.Lock()
	defer fleets.mu.Unlock()
	out := make([]fleetHooks, 0, len(f.members))
	for m := range f.members {
		out = append(out, m.hooks)
	}
	return out
}

// fleetHooks are what a join of a heartbeat is told: marking before each
// mark is sent, beaten after each beat (or mark that found a loss) the
// backend answered. Neither may block long.
type fleetHooks struct {
	marking func(mark int64)
	beaten  func([]loss)
}

// onBeat sets the hooks m's heartbeat calls.
func (m *FleetMember) onBeat(h fleetHooks) {
	fleets.mu.Lock()
	defer fleets.mu.Unlock()
	m.hooks = h
}

// markRing is how many marks a ledger remembers the times of: at one
// mark every MarkEvery, about 13 seconds of them.
const markRing = 128

// markTimes remembers when (µs, on the ledger's clock) each of the latest
// marks was noted: the ledger then held every admission the backend had
// acknowledged before the mark was sent.
type markTimes struct {
	mu   sync.Mutex
	mark [markRing]int64
	at   [markRing]int64
	next int
}

// note remembers that mark was noted at at.
func (r *markTimes) note(mark, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.next % markRing
	r.mark[i], r.at[i] = mark, at
	r.next++
}

// since returns the time from which the ledger is to be charged again
// when the backend kept mark and lost the writes after it: the time
// noted with it, or 0 (everything) when it is not among those
// remembered.
func (r *markTimes) since(mark int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range min(r.next, markRing) {
		if r.mark[i] == mark && mark > 0 {
			return r.at[i]
		}
	}
	return 0
}

// lower lowers the times of the marks noted so far to at most at: an
// admission of that time was charged after they were sent (a carry-back),
// so a backend that kept one of them may have lost the charge.
func (r *markTimes) lower(at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range min(r.next, markRing) {
		r.at[i] = min(r.at[i], at)
	}
}

// earliest returns the time (µs) of the earliest of as; MaxInt64 when
// there is none.
func earliest(as []Admission) int64 {
	at := int64(math.MaxInt64)
	for _, a := range as {
		at = min(at, a.At.UnixMicro())
	}
	return at
}
