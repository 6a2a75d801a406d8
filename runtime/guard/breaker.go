package guard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Probed is what a backend offers a circuit breaker (reported in its
// [ratelimit.Abilities.ForGuards]): it can be asked whether it serves,
// and tells an outage from a call's own failure. A backend whose calls
// are served by nodes that fail apart (a Redis Cluster's masters) says so
// with PerNode: each node then has a breaker of its own, so a node that
// is down fails only the calls it serves, and the backend's breaker
// guards only the look-ups of the nodes.
type Probed interface {
	// Node names the backend as a whole, for a [ratelimit.BreakerHook]:
	// a server's address, "cluster" for a Redis Cluster client.
	Node() string
	// Probe asks the backend whether it can serve again: nil when it
	// can, or an error that Unavailable judges; an error wrapping
	// [ErrClosed] ends the probing (the breaker stays open). nil closes
	// the breaker, so it must mean the calls will be served: a probe
	// asks the way they go (through a client's pool, whose stale errors
	// would open the breaker again), not only whether the node is up.
	Probe(ctx context.Context) error
	// Unavailable reports whether err, the error of a call or of a probe,
	// means that the backend (or the node) could not be reached or cannot
	// serve, rather than that it rejected this one call.
	Unavailable(err error) bool
	// PerNode reports whether the backend's calls are served by nodes
	// that fail apart, each with a breaker of its own; it must not
	// change. A backend that reports false is one node: the guards never
	// call its NodeOf or ProbeNode, which may fail wrapping
	// errors.ErrUnsupported.
	PerNode() bool
	// NodeOf returns the node that serves the key of req's limit i (of
	// req's first limit when it has none); an error when it cannot tell,
	// which fails the call and counts against the backend's breaker.
	NodeOf(ctx context.Context, req ratelimit.Request, i int) (string, error)
	// ProbeNode asks node whether it can serve again, as Probe.
	ProbeNode(ctx context.Context, node string) error
}

// PartError is the error of a call whose limits a backend decided in
// parts, a part per key (on several nodes), some of which failed: Failed
// maps the index of the first limit of each part that failed to its
// error. A breaker records each part's outcome on the breaker of its node.
type PartError struct {
	Err    error
	Failed map[int]error
}

// Error returns the call's error.
func (e *PartError) Error() string { return e.Err.Error() }

// Unwrap returns the call's error.
func (e *PartError) Unwrap() error { return e.Err }

// Breaker is the circuit breaker guard (see [WithBreaker]): a
// [ratelimit.Limiter] that fails the calls of its backend at once, with a
// [*ratelimit.BackendError] wrapping [ratelimit.ErrCircuitOpen], after
// consecutive calls failed because the backend was unavailable, and probes
// it in the background until it is back. It guards Allow and, when the
// backend offers them, Reserve, Adjust and ReserveSlot; the backend's
// other operations, and its own calls (a Peek, a Reset), are not
// guarded. The backend must offer a [Probed] (its
// [ratelimit.Abilities.ForGuards]); one that reports [Probed.PerNode] has
// a breaker per node.
type Breaker struct {
	backend // what it wraps, and the capabilities it offers
	probed  Probed
	nodes   Probed // nil when the backend is one node (not PerNode)
	hook    ratelimit.Hook
	bhook   ratelimit.BreakerHook
	cfg     breakerConfig
	// root guards every call, or the look-ups of a PerNode backend's nodes.
	root *breaker
	// byNode holds the breakers of a PerNode backend's nodes: node → *breaker.
	byNode sync.Map
	// probes counts the probes running.
	probes    atomic.Int64
	recoverer *Fallback // told when a probe finds the backend back
	bg        *background
}

// newBreakerGuard returns the circuit breaker guard around fb, the
// fallback of a backend, tuned by the options of this package among
// opts, or nil when they turn it off or the backend offers no [Probed].
// It tells the [ratelimit.BreakerHook] of the backend's hook (from the
// Config of its [ratelimit.Abilities]) when a breaker opens and closes,
// and logs it to slog.Default() unless that hook logs it
// ([ratelimit.SlogHook.LogsBreakers]); and when a probe finds the
// backend back, it tells fb ([Fallback.Recover]) before the breaker
// closes. Its probes run until [Breaker.Close].
func newBreakerGuard(fb *Fallback, opts ...Option) *Breaker {
	s := newSettings(opts)
	probed, ok := offered[Probed](fb)
	if !ok || s.breaker.failures <= 0 {
		return nil
	}
	g := &Breaker{backend: backendOf(fb), probed: probed, cfg: s.breaker, recoverer: fb, bg: newBackground()}
	g.ops.Reserve, g.ops.Adjust, g.ops.TakeSlot = g.Reserve, g.Adjust, g.ReserveSlot
	g.ops.Turn, g.ops.SlotTurn, g.ops.Waiting, g.ops.Cooling = g.turn, g.slotTurn, g.waiting, g.cooling
	g.nodes = perNode(probed)
	if cfg := fb.Abilities().Config; cfg != nil {
		g.hook = cfg.Hook
		g.bhook, _ = g.hook.(ratelimit.BreakerHook)
	}
	if lb, ok := g.hook.(interface{ LogsBreakers() bool }); !ok || !lb.LogsBreakers() {
		// An outage is logged once, whatever the hook: its start at Warn,
		// its end at Info. A hook that does not log (metrics) is told too.
		logged := ratelimit.BreakerHook(ratelimit.NewSlogHook(nil))
		if g.bhook != nil {
			logged = breakerHooks{g.bhook, logged}
		}
		g.bhook = logged
	}
	g.root = g.newBreaker(probed.Node(), probed.Probe)
	return g
}

// Unwrap returns the backend.
func (g *Breaker) Unwrap() ratelimit.Limiter { return g.next }

// Do guards OpReserve, OpAdjust and OpTakeSlot as Allow; while a breaker
// is open, it decides OpTurn and OpSlotTurn as reservations (out of any
// queue), declines OpWaiting, and fails OpCooling at once. It passes on
// the other operations. See [ratelimit.Limiter].
func (g *Breaker) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return g.do(ctx, g, op)
}

// Close stops the breakers' probes and their recoveries, and waits for
// them to end. A breaker that opens after Close stays open: nothing
// probes it. Close may be called more than once.
func (g *Breaker) Close() { g.bg.close() }

// Allow passes req on to the backend unless a breaker of the nodes that
// serve it is open, and records the outcome. See [ratelimit.Limiter].
func (g *Breaker) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	p, err := g.enter(ctx, &req)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, err := g.next.Allow(ctx, req)
	g.leave(ctx, p, err)
	return d, err
}

// Reserve is Allow for the backend's Reserve.
func (g *Breaker) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	if g.reserver == nil {
		return ratelimit.Decision{}, time.Time{}, unsupported(g.next, "reserve")
	}
	p, err := g.enter(ctx, &req)
	if err != nil {
		return ratelimit.Decision{}, time.Time{}, err
	}
	d, at, err := g.reserver.Reserve(ctx, req)
	g.leave(ctx, p, err)
	return d, at, err
}

// Adjust is Allow for the backend's Adjust.
func (g *Breaker) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	if g.reserver == nil {
		return unsupported(g.next, "adjust")
	}
	if delta == 0 {
		return g.reserver.Adjust(ctx, req, at, delta)
	}
	p, err := g.enter(ctx, &req)
	if err != nil {
		return err
	}
	err = g.reserver.Adjust(ctx, req, at, delta)
	g.leave(ctx, p, err)
	return err
}

// ReserveSlot is Allow for the backend's ReserveSlot.
func (g *Breaker) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	if g.slots == nil {
		return ratelimit.Decision{}, time.Time{}, unsupported(g.next, "hold concurrency slots")
	}
	p, err := g.enter(ctx, &req)
	if err != nil {
		return ratelimit.Decision{}, time.Time{}, err
	}
	d, at, err := g.slots.ReserveSlot(ctx, req, slot, token)
	g.leave(ctx, p, err)
	return d, at, err
}

// CircuitOpen reports whether a breaker of the guard is failing calls
// without asking the backend now (for a backend of several nodes, the
// calls of at least one node).
func (g *Breaker) CircuitOpen() bool {
	open := g.root.open()
	g.byNode.Range(func(_, b any) bool {
		open = open || b.(*breaker).open()
		return !open
	})
	return open
}

// Down reports whether the breaker of the backend as a whole is open.
func (g *Breaker) Down() bool { return g.root.open() }

// NodeOpen reports whether the breaker of node (of a backend that reports
// [Probed.PerNode]) is open.
func (g *Breaker) NodeOpen(node string) bool {
	b, ok := g.byNode.Load(node)
	return ok && b.(*breaker).open()
}

// Probing reports whether a probe of the guard's breakers runs.
func (g *Breaker) Probing() bool { return g.probes.Load() > 0 }

// Circuits returns, for each breaker of the guard that is open now, its
// node and when it opened: empty while every call goes to the backend.
func (g *Breaker) Circuits() map[string]time.Time {
	open := map[string]time.Time{}
	add := func(b *breaker) {
		if since, ok := b.openSince(); ok {
			open[b.node] = since
		}
	}
	add(g.root)
	g.byNode.Range(func(_, b any) bool {
		add(b.(*breaker))
		return true
	})
	return open
}

// passage is the breakers a call passed: one, or for a call of a backend
// of several nodes with a key per limit, one per part (a key), with the
// index of the part's first limit.
type passage struct {
	one   *breaker
	parts []part
}

// part is a part of a call, by the index of its first limit, and the
// breaker of its node.
type part struct {
	first int
	b     *breaker
}

// enter returns the breakers that the call req passes, or the error that
// fails it at once: a refusal of an open breaker, or a failed look-up of a
// node.
func (g *Breaker) enter(ctx context.Context, req *ratelimit.Request) (passage, error) {
	if !g.root.allow() {
		return passage{}, g.refuse(ctx, req)
	}
	if g.nodes == nil {
		return passage{one: g.root}, nil
	}
	if len(req.Limits) > 0 {
		if err := req.Validate(); err != nil {
			return passage{}, err
		}
	}
	if req.Keys == nil {
		b, err := g.nodeBreaker(ctx, req, 0)
		return passage{one: b}, err
	}
	var p passage
	for i := range req.Keys {
		if first(req, i) != i {
			continue
		}
		b, err := g.nodeBreaker(ctx, req, i)
		if err != nil {
			return passage{}, err
		}
		p.parts = append(p.parts, part{first: i, b: b})
	}
	if len(p.parts) == 1 {
		return passage{one: p.parts[0].b}, nil
	}
	return p, nil
}

// first returns the index of the first limit of req whose key and name
// (see Request.Line) are those of limit i.
func first(req *ratelimit.Request, i int) int {
	for j := range i {
		if nj, _ := req.Line(j); req.Keys[j] == req.Keys[i] && nj == nameOf(req, i) {
			return j
		}
	}
	return i
}

// nodeBreaker returns the breaker of the node that serves the key of req's
// limit i, made on first use, or the error that fails the call at once.
func (g *Breaker) nodeBreaker(ctx context.Context, req *ratelimit.Request, i int) (*breaker, error) {
	node, err := g.nodes.NodeOf(ctx, *req, i)
	g.root.record(ctx, err)
	if err != nil {
		return nil, g.failed(ctx, *req, err)
	}
	b, loaded := g.byNode.Load(node)
	if !loaded {
		b, _ = g.byNode.LoadOrStore(node, g.newBreaker(node, func(ctx context.Context) error { return g.nodes.ProbeNode(ctx, node) }))
	}
	nb := b.(*breaker)
	if !nb.allow() {
		return nil, g.refuse(ctx, req)
	}
	return nb, nil
}

// leave records the outcome err of a call that passed p: of each part on
// its breaker when the backend says which parts failed ([PartError]).
// An error that is not a backend's (an invalid request) records nothing.
func (g *Breaker) leave(ctx context.Context, p passage, err error) {
	if err != nil && !errors.Is(err, ratelimit.ErrBackend) {
		return
	}
	if p.one != nil {
		p.one.record(ctx, err)
		return
	}
	var pe *PartError
	parted := err != nil && errors.As(err, &pe)
	for _, pt := range p.parts {
		perr := err
		if parted {
			perr = pe.Failed[pt.first]
		}
		pt.b.record(ctx, perr)
	}
}

// refuse returns the error of a call that an open breaker fails, telling
// the hook; an invalid request's own error instead, as the backend would.
func (g *Breaker) refuse(ctx context.Context, req *ratelimit.Request) error {
	if len(req.Limits) > 0 {
		if err := req.Validate(); err != nil {
			return err
		}
	}
	return g.failed(ctx, *req, ratelimit.ErrCircuitOpen)
}

// failed returns the error of a call the guard failed because of cause,
// telling the hook, as the backend tells a failure.
func (g *Breaker) failed(ctx context.Context, req ratelimit.Request, cause error) error {
	err := &ratelimit.BackendError{Name: req.Name, Err: cause}
	if g.hook != nil {
		seen := ratelimit.Request{Name: req.Name, Key: callkey.Bound(req.Key), Keys: boundKeys(req.Keys), Shared: req.Shared, Cost: req.Cost, Limits: req.Limits, Rule: req.Rule}
		g.hook.Failed(ctx, &seen, err)
	}
	return err
}

// boundKeys returns keys bounded (see callkey.Bound), copied if any
// changes.
func boundKeys(keys []string) []string {
	for i, k := range keys {
		if b := callkey.Bound(k); b != k {
			out := append([]string(nil), keys...)
			for j := i; j < len(out); j++ {
				out[j] = callkey.Bound(out[j])
			}
			return out
		}
	}
	return keys
}

// newBreaker returns the guard's breaker of node, which probe asks. When a
// probe finds the node back, the breaker tells the fallback it wraps
// ([Fallback.Recover]), so that its admissions are charged to the backend
// before it decides again.
func (g *Breaker) newBreaker(node string, probe func(context.Context) error) *breaker {
	b := newBreaker(g.cfg, node, probe, g.bhook)
	b.bg, b.unavailable, b.probes = g.bg, g.probed.Unavailable, &g.probes
	b.confirm = probe
	r, wait := g.recoverer, b.cfg.maxBackoff
	b.recover = func(ctx context.Context) { r.Recover(ctx, wait) }
	b.holdOpen = r.Recovering
	return b
}

// perNode returns probed when its calls are served by nodes that fail
// apart ([Probed.PerNode]), else nil: a breaker and a ledger ask the
// node of a call only then.
func perNode(probed Probed) Probed {
	if probed != nil && probed.PerNode() {
		return probed
	}
	return nil
}

// unsupported is the error of a capability that backend does not offer.
func unsupported(backend ratelimit.Limiter, what string) error {
	return fmt.Errorf("ratelimit: %T cannot %s: %w", backend, what, errors.ErrUnsupported)
}

// The circuit breaker defaults; see [WithBreaker].
const (
	// DefaultBreakerFailures is how many consecutive failed calls open the
	// breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerBackoff is how long an open breaker waits before it
	// first asks its node whether it is back, and between such probes.
	DefaultBreakerBackoff = 150 * time.Millisecond
	// DefaultBreakerMaxBackoff bounds the wait between probes as it
	// doubles. It equals [DefaultBreakerBackoff]: by default the wait does
	// not grow, so the backend decides again within about 150ms of its
	// return however long it was away.
	DefaultBreakerMaxBackoff = DefaultBreakerBackoff
)

// stragglerWait is how long after a breaker closed its fallback is told
// again (for the charges of a fallback's last decisions); recoverTimeout
// bounds the recovery a probe runs before the breaker closes.
const (
	stragglerWait  = 50 * time.Millisecond
	recoverTimeout = 10 * time.Second
	// confirmTimeout bounds the probes that confirm an outage before a
	// breaker opens; the backend's probe has its own, shorter timeouts.
	confirmTimeout = 5 * time.Second
	// confirmProbes is how many probes in a row must fail to confirm an
	// outage: a server that refuses connections fails them at once, one
	// that does not answer after each probe's timeout, and a process
	// starved of CPU for a moment (its reads time out though the server
	// answered) gets several chances to see the server answer.
	confirmProbes = 3
)

type breakerConfig struct {
	failures            int
	backoff, maxBackoff time.Duration
}

// breaker is a consecutive-failure circuit breaker with a background
// probe. Its closed path is one or two atomic loads.
type breaker struct {
	cfg  breakerConfig
	node string
	// ask asks the node whether it can serve; hook may be nil.
	ask  func(context.Context) error
	hook ratelimit.BreakerHook
	// unavailable reports whether an error means the node could not be
	// reached or cannot serve (see [Probed]).
	unavailable func(error) bool
	// probes counts the probes running, of every breaker of a guard.
	probes *atomic.Int64
	// recover, if set, is run by the probe that finds the node back,
	// before the breaker closes, and on a goroutine of its own once it
	// closed (see [Fallback.Recover]).
	recover func(context.Context)
	// holdOpen, if set, reports whether a call that the node answered
	// late must leave the breaker open for the probe to close, after
	// recover.
	holdOpen func() bool
	// confirm, if set, is asked by the call whose failure would open the
	// breaker: the breaker opens only if the node does not answer it
	// either (see confirmed).
	confirm func(context.Context) error
	// confirming is set while a call asks confirm.
	confirming atomic.Bool
	// bg runs the probe and the recovery after closing, until the guard
	// is closed; nil runs them on plain goroutines.
	bg *background
	// now and after tell the time and wait; tests replace them.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	failures atomic.Int64 // consecutive failures while closed
	isOpen   atomic.Bool

	mu       sync.Mutex
	openedAt time.Time
	// stop is closed when the breaker closes; it tells the probe of the
	// current opening (the only one that may close it) to end.
	stop chan struct{}
}

// newBreaker returns the breaker for cfg guarding node, which ask probes,
// or nil when it is turned off. Every error counts as the node being
// unavailable until unavailable is set.
func newBreaker(cfg breakerConfig, node string, ask func(context.Context) error, hook ratelimit.BreakerHook) *breaker {
	if cfg.failures <= 0 {
		return nil
	}
	cfg.maxBackoff = max(cfg.maxBackoff, cfg.backoff)
	return &breaker{
		cfg: cfg, node: node, ask: ask, hook: hook, now: time.Now, after: time.After,
		unavailable: func(error) bool { return true }, probes: new(atomic.Int64),
	}
}

// allow reports whether a call may go to the node: whether the breaker is
// closed.
func (b *breaker) allow() bool { return !b.isOpen.Load() }

// open reports whether calls fail at once now.
func (b *breaker) open() bool { return b.isOpen.Load() }

// openSince returns when the breaker opened, and whether it is open.
func (b *breaker) openSince() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openedAt, b.isOpen.Load()
}

// succeeded closes the breaker: the node answered.
func (b *breaker) succeeded() {
	if !b.isOpen.Load() && b.failures.Load() == 0 {
		return
	}
	b.mu.Lock()
	b.failures.Store(0)
	if !b.isOpen.Load() || (b.holdOpen != nil && b.holdOpen()) {
		// Closed; or open with charges to carry back first, which the
		// probe does when it finds Redis back, within a backoff.
		b.mu.Unlock()
		return
	}
	b.closeLocked()
}

// closeLocked closes the open breaker, ends its probe and tells the hook.
// It is called with b.mu held, which keeps the hook's calls in order, and
// releases it.
func (b *breaker) closeLocked() {
	defer b.mu.Unlock()
	b.isOpen.Store(false)
	close(b.stop)
	if b.recover != nil {
		// For what a fallback admitted while the breaker closed: calls
		// that found it open a moment ago.
		b.bg.spawn(func(ctx context.Context) {
			select {
			case <-time.After(stragglerWait):
				b.recover(ctx)
			case <-ctx.Done():
			}
		})
	}
	if b.hook != nil {
		b.hook.BreakerClosed(b.node, b.now().Sub(b.openedAt))
	}
}

// failed counts a failure, caused by err, and opens the breaker after
// enough of them in a row.
func (b *breaker) failed(err error) {
	if b.isOpen.Load() {
		return // a call sent before the breaker opened
	}
	if b.failures.Add(1) < int64(b.cfg.failures) {
		return
	}
	if b.confirm != nil && !b.confirmed() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.isOpen.Load() {
		return
	}
	b.isOpen.Store(true)
	b.openedAt = b.now()
	b.stop = make(chan struct{})
	stop := b.stop
	b.bg.spawn(func(ctx context.Context) { b.probe(ctx, stop) })
	if b.hook != nil {
		b.hook.BreakerOpened(b.node, err)
	}
}

// confirmed reports whether the node does not answer confirm either,
// asked up to confirmProbes times in a row, so
// that the failures in a row are evidence of an outage and the breaker
// may open. A node that answers (a server busy enough to time out calls,
// or a client whose own goroutines were starved of CPU) resets the count
// instead: load is not an outage. One call asks at a time; the others
// that fail meanwhile leave the breaker as it is.
func (b *breaker) confirmed() bool {
	if !b.confirming.CompareAndSwap(false, true) {
		return false
	}
	defer b.confirming.Store(false)
	ctx, cancel := context.WithTimeout(backgroundContext(), confirmTimeout)
	defer cancel()
	for range confirmProbes {
		err := b.confirm(ctx)
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return true
		}
		if err == nil || !b.unavailable(err) {
			b.failures.Store(0)
			return false
		}
	}
	return true
}

// probe asks the node whether it is back until it answers and probe closes
// the breaker, or stop is closed, or ctx ends (the limiter is closed), or
// the client is: backoff after the breaker opened, then backoff (doubling
// up to maxBackoff) after each probe began, or when it ended if it took
// longer.
func (b *breaker) probe(ctx context.Context, stop chan struct{}) {
	b.probes.Add(1)
	defer b.probes.Add(-1)
	interval, wait := b.cfg.backoff, b.cfg.backoff
	var back time.Time // when a probe first found the node back
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-b.after(wait):
		}
		began := b.now()
		err := b.ask(ctx)
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return // nothing will answer: the breaker stays open
		}
		if err == nil || !b.unavailable(err) {
			if back.IsZero() {
				back = began
			}
			if b.recovered(ctx, back) {
				b.closeFor(stop)
				return
			}
		}
		interval = min(2*interval, b.cfg.maxBackoff)
		wait = max(interval-b.now().Sub(began), 0)
	}
}

// recovered runs the fallback's recovery, when there is one, after a
// probe found the node back (first at back), and reports whether the
// breaker may close: once the recovery left nothing to carry back, or
// when it could not for recoverTimeout (the node answers the probe but
// not yet the calls that carry back, such as while a client's pool still
// holds the errors of the outage), after which the fallback's carry-back
// goes on with the breaker closed.
func (b *breaker) recovered(ctx context.Context, back time.Time) bool {
	if b.recover == nil {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	b.recover(rctx)
	cancel()
	return b.holdOpen == nil || !b.holdOpen() || b.now().Sub(back) >= recoverTimeout
}

// closeFor closes the breaker if it is still in the opening whose probe
// was told to end by stop.
func (b *breaker) closeFor(stop chan struct{}) {
	b.mu.Lock()
	if !b.isOpen.Load() || b.stop != stop {
		b.mu.Unlock()
		return
	}
	b.failures.Store(0)
	b.closeLocked()
}

// record feeds the outcome of a call sent to the node to the breaker.
func (b *breaker) record(ctx context.Context, err error) {
	switch {
	case err == nil:
		b.succeeded()
	case ctx.Err() != nil:
		// The caller gave up: it says nothing about the node.
	case errors.Is(err, ratelimit.ErrBusy):
		// The client was too busy to send the call: our own load, which
		// says nothing about the node either.
	case b.unavailable(err):
		b.failed(err)
	default: // the node answered, with an error about this call only
		b.succeeded()
	}
}

// breakerHooks tells each of its hooks, in order.
type breakerHooks []ratelimit.BreakerHook

// BreakerOpened tells each hook.
func (hs breakerHooks) BreakerOpened(node string, err error) {
	for _, h := range hs {
		h.BreakerOpened(node, err)
	}
}

// BreakerClosed tells each hook.
func (hs breakerHooks) BreakerClosed(node string, open time.Duration) {
	for _, h := range hs {
		h.BreakerClosed(node, open)
	}
}

// nameOf returns the name limit i of req keeps its state under (see
// ratelimit.Request.Line).
func nameOf(req *ratelimit.Request, i int) string {
	name, _ := req.Line(i)
	return name
}
