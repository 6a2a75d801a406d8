package guard

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/monotime"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The ledger: what the backend admitted in windows still open, with the
// fallback's admissions once carried back, so that when the backend lost
// writes (the process's mark it holds is older than the one it
// acknowledged: [FleetAbilities.Marks]) each process charges it again
// what it had admitted after the mark it kept, and a window that the loss
// emptied does not start empty. It is a [carryBack] that prunes
// admissions whose windows closed, bounded as the fallback's (MaxCarried,
// MaxCarriedPerCall).

// ledger is a fallback's ledger and the state of its carry-back.
type ledger struct {
	admitted *carryBack
	// marks are when the latest marks were noted (see markTimes).
	marks markTimes
	// running is held while the ledger is carried back; kept, guarded by
	// it, holds what the backend could not be asked about then (keptN
	// counts them).
	running sync.Mutex
	kept    []Admission
	keptN   atomic.Int64
	// owed is set when a loss was seen and the ledger is not carried back
	// yet: owedAt holds, for each node that lost writes ("": the
	// backend's only one), the time (µs) from which to charge it again,
	// guarded by owedMu; carrying while it is.
	owed, carrying atomic.Bool
	owedMu         sync.Mutex
	owedAt         map[string]int64
	// nodes tells which node holds a limit's key, around a backend that
	// reports [Probed.PerNode]; nil: one node.
	nodes Probed
	// losses counts the losses carried back; charged and dropped the
	// units charged again and those that did not fit or got no reply.
	losses, charged, dropped atomic.Int64
	// wall is the wall clock less the monotonic one (µs), as last read:
	// an admission is recorded at the monotonic clock plus wall, one read
	// of a clock (see ledgerNow).
	wall atomic.Int64
}

// startLedger keeps f's ledger when its backend offers a [Carrier] and a
// [Heartbeater] that keeps marks ([FleetAbilities.Marks]) and f counts
// its fleet, whose heartbeat writes the marks. Around a backend of
// several nodes ([Probed.PerNode]), each node keeps marks of its own, and
// a node that lost writes is charged again only what it holds.
func (f *Fallback) startLedger(backend ratelimit.Limiter) {
	hb, ok := offered[Heartbeater](backend)
	if !ok || !hb.FleetAbilities().Marks || f.carrier == nil || f.fleet == nil {
		return
	}
	admitted := newCarryBack()
	admitted.ledger = true
	f.ledger = &ledger{admitted: admitted}
	probed, _ := offered[Probed](backend)
	f.ledger.nodes = perNode(probed)
	f.ledger.wall.Store(time.Now().UnixMicro() - monotime.Micros())
	f.fleet.onBeat(fleetHooks{marking: f.marking, beaten: f.beaten})
}

// ledgerAdmitted records in f's ledger that the backend admitted req at
// now (see ledgerNow), when it did and f keeps a ledger.
func (f *Fallback) ledgerAdmitted(req *ratelimit.Request, d ratelimit.Decision, now int64) {
	if f.ledger == nil || !d.Allowed {
		return
	}
	bounded := *req
	bounded.Key = callkey.Bound(req.Key)
	if req.Keys != nil {
		bounded.Keys = boundKeys(req.Keys)
	}
	f.ledger.admitted.record(&bounded, nil, now)
	f.fleet.Fleet().admitted()
}

// marking notes when mark is about to be sent: the ledger holds what the
// backend admitted before then.
func (f *Fallback) marking(mark int64) {
	f.ledger.marks.note(mark, f.ledgerNow())
	f.ledger.admitted.marked.Add(1)
}

// ledgerNow returns the time in µs of the backend's clock or, without
// one, of the process's wall clock as of the last beat moved on by the
// monotonic clock since: a read of the wall clock costs a second one.
func (f *Fallback) ledgerNow() int64 {
	if f.clock != nil {
		return f.clock.Now().UnixMicro()
	}
	return monotime.Micros() + f.ledger.wall.Load()
}

// beaten is told of each beat of f's heartbeat that the backend answered,
// and of each mark that found a loss: the ledger forgets the admissions
// whose windows closed; when a node lost writes, or when the last
// carry-back of the ledger kept admissions, the ledger is carried back on
// a goroutine of its own.
func (f *Fallback) beaten(lost []loss) {
	l := f.ledger
	l.wall.Store(time.Now().UnixMicro() - monotime.Micros())
	l.admitted.sweep(f.now())
	for _, found := range lost {
		l.owe(found.node, l.marks.since(found.kept))
	}
	if !l.owed.Load() && l.keptN.Load() == 0 {
		return
	}
	f.bg.spawn(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
		defer cancel()
		f.carryLedger(ctx)
	})
}

// owe notes that node is to be charged again what the ledger holds from
// since (µs): the earliest of its losses not carried back yet.
func (l *ledger) owe(node string, since int64) {
	l.owedMu.Lock()
	defer l.owedMu.Unlock()
	if l.owedAt == nil {
		l.owedAt = map[string]int64{}
	}
	if at, ok := l.owedAt[node]; !ok || since < at {
		l.owedAt[node] = since
	}
	l.owed.Store(true)
}

// owing returns the losses owed, by node, owing them no more; nil when
// none is.
func (l *ledger) owing() map[string]int64 {
	l.owedMu.Lock()
	defer l.owedMu.Unlock()
	owed := l.owedAt
	l.owedAt = nil
	l.owed.Store(false)
	return owed
}

// CheckMarks writes the process's mark now and, if it finds that the
// backend lost writes, charges it again what the ledger holds since the
// mark it kept before returning (the ledgers of the fleet's other
// fallbacks on goroutines of their own); it reports whether it found a
// loss, and the backend's error. It does nothing without a ledger. Recover
// calls it before the breaker closes; a backend calls it when it may have
// reached another server or one that restarted, before it decides calls
// there.
func (f *Fallback) CheckMarks(ctx context.Context) (bool, error) {
	if f.ledger == nil {
		return false, nil
	}
	ctx = asBackground(ctx)
	lost, err := f.fleet.Fleet().markNow(ctx)
	f.carryLedger(ctx)
	return lost, err
}

// carryLedger charges the ledger to the backend, at the admissions'
// times, when a loss was seen since it last did (what it admitted after
// the mark the backend kept), or what the backend could not be asked
// about then; one goroutine at a time.
func (f *Fallback) carryLedger(ctx context.Context) {
	l := f.ledger
	l.running.Lock()
	defer l.running.Unlock()
	l.carrying.Store(true)
	defer l.carrying.Store(false)
	send := l.kept
	owed := l.owing()
	if owed != nil {
		// What each node that lost writes held since the mark it kept
		// (the ledger holds it), and what an earlier carry kept, less
		// what that first part sends again.
		send = l.lostOf(ctx, l.admitted.snapshot(f.now()), owed, true)
		send = append(send, l.lostOf(ctx, l.kept, owed, false)...)
		defer l.losses.Add(1)
	}
	if len(send) == 0 {
		return
	}
	res := f.carrier.Carry(ctx, send)
	l.marks.lower(earliest(send))
	l.kept = res.Kept
	l.keptN.Store(int64(len(res.Kept)))
	l.charged.Add(res.Charged)
	l.dropped.Add(res.Dropped)
	if owed != nil {
		slog.Default().Warn("ratelimit: the backend lost writes: charged again what it had admitted after the last mark it kept, in windows still open",
			"admissions", len(send), "charged", res.Charged, "dropped", res.Dropped, "kept", len(res.Kept))
	}
}

// lostOf returns the parts of as that the nodes in owed lost (in), or
// those they did not (!in): an admission's limits whose keys a node that
// lost writes holds, admitted at or after the time it is owed from. A
// limit whose node cannot be told (no answer, or a key kept as a
// stand-in, whose node the request no longer tells) counts as on each
// node that lost writes: it errs towards denying.
func (l *ledger) lostOf(ctx context.Context, as []Admission, owed map[string]int64, in bool) []Admission {
	earliest := int64(math.MaxInt64) // of a limit whose node cannot be told
	for _, since := range owed {
		earliest = min(earliest, since)
	}
	var out []Admission
	for _, a := range as {
		var only []int
		limits := limitsOf(&a)
		for _, i := range limits {
			since, ok := l.owedSince(ctx, &a.Req, i, owed, earliest)
			if (ok && a.At.UnixMicro() >= since) == in {
				only = append(only, i)
			}
		}
		if len(only) == 0 {
			continue
		}
		if a.Only != nil || len(only) < len(limits) {
			a.Only = only
		}
		out = append(out, a)
	}
	return out
}

// limitsOf returns the indices of the limits of a to charge.
func limitsOf(a *Admission) []int {
	if a.Only != nil {
		return a.Only
	}
	idx := make([]int, max(len(a.Req.Limits), 1))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// owedSince returns from when the node that holds the key of req's limit
// i is owed (see lostOf), and whether it is; earliest when its node
// cannot be told.
func (l *ledger) owedSince(ctx context.Context, req *ratelimit.Request, i int, owed map[string]int64, earliest int64) (int64, bool) {
	if l.nodes == nil {
		since, ok := owed[""]
		return since, ok
	}
	key := req.Key
	if req.Keys != nil && i < len(req.Keys) {
		key = req.Keys[i]
	}
	node, err := "", error(nil)
	if callkey.Bound(key) == key {
		node, err = l.nodes.NodeOf(ctx, *req, i)
	}
	if node == "" || err != nil {
		return earliest, true
	}
	since, ok := owed[node]
	return since, ok
}

// pending reports whether l is to be carried back, or is on its way: a
// breaker stays open meanwhile.
func (l *ledger) pending() bool {
	return l != nil && (l.owed.Load() || l.carrying.Load() || l.keptN.Load() > 0)
}

// forget forgets what l holds of name and key (see carryBack.forget).
func (l *ledger) forget(name, key string) {
	if l != nil {
		l.admitted.forget(name, key)
	}
}

// carried records in l what the fallback carried back to the backend:
// the admissions of taken but those kept (told apart by name, key and
// time), which were not sent; the marks noted so far are lowered to the
// earliest, since the charges may follow them (see markTimes.lower).
func (l *ledger) carried(taken, kept []Admission) {
	if l == nil {
		return
	}
	type sent struct {
		name, key string
		at        time.Time
	}
	unsent := map[sent]int{}
	for _, a := range kept {
		unsent[sent{a.Req.Name, a.Req.Key, a.At}]++
	}
	for _, a := range taken {
		if k := (sent{a.Req.Name, a.Req.Key, a.At}); unsent[k] > 0 {
			unsent[k]--
			continue
		}
		l.admitted.record(&a.Req, a.Only, a.At.UnixMicro())
	}
	l.marks.lower(earliest(taken))
}

// Restored returns how many times the fallback found that the backend
// had lost its state and charged it again what it had admitted in windows
// still open (its ledger), and the units charged again and dropped
// (see [CarryResult]).
func (f *Fallback) Restored() (losses, charged, dropped int64) {
	if f.ledger == nil {
		return 0, 0, 0
	}
	return f.ledger.losses.Load(), f.ledger.charged.Load(), f.ledger.dropped.Load()
}

// spanOf returns how long (µs) an admission of limits weighs at most: the
// longest of its limits' spans (a log's or a window's period, a calendar
// period's longest window, a sliding window's two periods, a bucket's
// drain of its capacity).
func spanOf(limits []ratelimit.Limit) int64 {
	var span int64
	for _, lim := range limits {
		p := lim.Period.Microseconds()
		a, _ := limitfacts.Lookup(string(lim.AlgorithmOrDefault()))
		if lim.Calendar != "" {
			p = calendarSpan(lim.Calendar)
		} else {
			p = a.State.Span(p, lim.Threshold, lim.MaxCost())
		}
		span = max(span, p)
	}
	return span
}

// calendarSpan returns the longest window (µs) of a calendar period: a
// day of 25 hours, a week, month or year with one such day.
func calendarSpan(period string) int64 {
	day := 24 * time.Hour
	d := map[string]time.Duration{limitfacts.Day: day, limitfacts.Week: 7 * day, limitfacts.Month: 31 * day}[period]
	if d == 0 {
		d = 366 * day
	}
	return (d + time.Hour).Microseconds()
}

// mergeLedger adds units admitted at now, with mark marks noted, to e,
// which holds MaxCarriedPerCall admissions, so that each holds a short
// span of time: to its latest, whose time becomes now, when the
// admission before it is less than a sixteenth of e's span old and no
// mark was noted since the latest was recorded; else the two admissions
// nearest in time are merged, at the later's time, and now's is e's
// latest. Either charges units later than they were admitted, by about a
// sixteenth of the span: it denies more, never less. Admissions rarely
// merge across a mark, so a loss after it charges again little of what
// was admitted before (see markTimes).
func mergeLedger(e *carried, now, units, mark int64) {
	last := len(e.at) - 1
	if e.at[last-1] > now-e.span/16 && e.mark == mark {
		e.at[last] = max(e.at[last], now)
		e.units[last] += units
		return
	}
	mergePair(e, nearestPair(e), now, units)
	e.mark = mark
}

// mergeNearest adds units admitted at now to e, which holds
// MaxCarriedPerCall admissions of the fallback: to its latest, whose time
// becomes now, when now is no farther from it than the two nearest
// admissions of e are from each other; else those two are merged, at the
// later's time, and now's is e's latest. Either charges units later than
// they were admitted, by the least gap: it denies more, never less.
func mergeNearest(e *carried, now, units int64) {
	last := len(e.at) - 1
	if i := nearestPair(e); now-e.at[last] > e.at[i+1]-e.at[i] {
		mergePair(e, i, now, units)
		return
	}
	e.at[last] = max(e.at[last], now)
	e.units[last] += units
}

// nearestPair returns i such that e's admissions i and i+1 are the nearest
// in time of any two in a row.
func nearestPair(e *carried) int {
	i := 0
	for j := 1; j < len(e.at)-1; j++ {
		if e.at[j+1]-e.at[j] < e.at[i+1]-e.at[i] {
			i = j
		}
	}
	return i
}

// mergePair merges e's admission i into i+1, at the later's time, and
// makes units admitted at now e's latest.
func mergePair(e *carried, i int, now, units int64) {
	last := len(e.at) - 1
	e.units[i+1] += e.units[i]
	copy(e.at[i:], e.at[i+1:])
	copy(e.units[i:], e.units[i+1:])
	e.at[last], e.units[last] = now, units
}

// sweep forgets the admissions whose windows all closed before now.
func (c *carryBack) sweep(now int64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		var gone int64
		gone += s.filter(func(e *carried) bool {
			gone += int64(e.dropClosed(now))
			return len(e.at) > 0
		})
		s.mu.Unlock()
		c.n.Add(-gone)
	}
}

// dropClosed forgets e's oldest admissions whose windows closed before
// now and returns how many it forgot.
func (e *carried) dropClosed(now int64) int {
	n := 0
	for n < len(e.at) && e.at[n]+e.span <= now {
		n++
	}
	if n > 0 {
		e.at = append(e.at[:0], e.at[n:]...)
		e.units = append(e.units[:0], e.units[n:]...)
	}
	return n
}

// snapshot returns the admissions remembered whose windows may still be
// open at now, remembering them still.
func (c *carryBack) snapshot(now int64) []Admission {
	var out []Admission
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, e := range s.calls {
			for ; e != nil; e = e.next {
				out = e.admissions(out, now)
			}
		}
		s.mu.Unlock()
	}
	return out
}
