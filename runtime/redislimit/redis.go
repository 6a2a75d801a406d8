package redislimit

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// Limiter decides calls in Redis with one script round trip each (or
// several concurrent calls per round trip, see [WithBatching]), on the
// server's clock, so every process sharing the server shares one exact
// limit; its deny cache answers repeats of a denial that nothing can
// change ([WithDenyCache]). It works with a single server, a failover
// client and a Redis Cluster. The package doc says what its scripts, keys
// and failures cost.
//
// It is the Redis backend behind the guards of package guard that its
// options turn on: the deny cache ([guard.DenyCache]) answers before Redis
// is asked. Its methods that a guard intercepts (Allow, Reserve, Adjust,
// ReserveSlot, Reset) go through the guards; the others are the backend's.
type Limiter struct {
	*redisBackend
	// denials is the deny cache guard around backend; nil when off.
	denials *guard.DenyCache
}

// redisBackend is the Redis backend: it decides calls in Redis, and offers the
// guards what they need through the capabilities of package guard.
type redisBackend struct {
	client redis.UniversalClient
	// cluster is client when it is a Redis Cluster client.
	cluster *redis.ClusterClient
	// breaker guards every call, or for a cluster finding a call's
	// master; nil when breakers are off.
	breaker *breaker
	// nodes holds the breakers of a cluster's masters: address → *breaker.
	nodes sync.Map
	// batcher groups concurrent calls (see [WithBatching]); nil when off.
	batcher *batcher
	// local decides the calls of FailLocal rules that Redis cannot decide.
	local *ratelimit.MemoryLimiter
	// breakerHook is told of the breakers' changes; nil without a hook.
	breakerHook ratelimit.BreakerHook
	// fleet is the limiter's join of the heartbeat of its client and
	// prefix, which counts the processes sharing the Redis, for the
	// fallback; nil when it takes no part.
	fleet *guard.FleetMember
	// carry holds what the fallback admitted, to charge to Redis when it
	// answers again.
	carry *carryBack
	// bg runs the breakers' probes and carry-backs until Close.
	bg  *background
	cfg ratelimit.Config
	settings
}

// New returns a limiter that keeps its state in client's Redis. Its
// background work (the heartbeat it shares with the other limiters of
// client, its breakers' probes) runs until [Limiter.Close] or until client
// is closed.
func New(client redis.UniversalClient, opts ...ratelimit.Option) *Limiter {
	b := newBackend(client, opts)
	return &Limiter{redisBackend: b, denials: guard.NewDenyCache(b, opts...)}
}

// newBackend returns the Redis backend of New.
func newBackend(client redis.UniversalClient, opts []ratelimit.Option) *redisBackend {
	l := &redisBackend{client: client, cfg: ratelimit.NewConfig(opts...), settings: newSettings(opts), bg: newBackground()}
	l.breakerHook, _ = l.cfg.Hook.(ratelimit.BreakerHook)
	if l.breakerHook == nil {
		// An outage is logged once, whatever the hook: its start at Warn,
		// its end at Info.
		l.breakerHook = ratelimit.NewSlogHook(nil)
	}
	l.local = newFallback(l.cfg)
	l.cluster, _ = client.(*redis.ClusterClient)
	l.breaker = l.newBreaker(clientAddr(client), l.probe)
	l.carry = newCarryBack()
	l.batcher = newBatcher(l, client, l.batch)
	if l.fallbackProcesses == 0 && !l.noHeartbeat && client != nil {
		l.joinFleet()
	}
	return l
}

// Config returns the configuration the limiter was made with. See
// [ratelimit.Configured].
func (l *redisBackend) Config() *ratelimit.Config { return &l.cfg }

// CircuitOpen reports whether a circuit breaker of the limiter is failing
// calls without asking Redis now (for a Redis Cluster, the calls of at
// least one master), as a health check may want to know.
func (l *redisBackend) CircuitOpen() bool {
	if l.breaker == nil {
		return false
	}
	open := l.breaker.open()
	l.nodes.Range(func(_, b any) bool {
		open = open || b.(*breaker).open()
		return !open
	})
	return open
}

// Circuits returns, for each circuit breaker of the limiter that is open
// now, its node (the client's address, or a cluster master's) and when it
// opened: empty while every call goes to Redis.
func (l *redisBackend) Circuits() map[string]time.Time {
	open := map[string]time.Time{}
	if l.breaker == nil {
		return open
	}
	add := func(b *breaker) {
		if since, ok := b.openSince(); ok {
			open[b.node] = since
		}
	}
	add(l.breaker)
	l.nodes.Range(func(_, b any) bool {
		add(b.(*breaker))
		return true
	})
	return open
}

// CachedDenial returns how much longer the limiter's deny cache repeats a
// denial of req without asking Redis, and whether it holds one.
func (l *Limiter) CachedDenial(req ratelimit.Request) (time.Duration, bool) {
	if l.denials == nil {
		return 0, false
	}
	return l.denials.CachedDenial(req)
}

// clientAddr names the node of client's breaker for a [ratelimit.BreakerHook]: its
// address, "cluster" for a cluster client (whose masters have breakers of
// their own), "ring" for a ring.
func clientAddr(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return "cluster"
	case *redis.Ring:
		return "ring"
	}
	return ""
}

// probe asks Redis whether the limiter's breaker may close: with a script
// on a connection of its own (see [probeNode]), or for a cluster client
// by finding a master, which the breaker guards there.
func (l *redisBackend) probe(ctx context.Context) error {
	switch c := l.client.(type) {
	case *redis.ClusterClient:
		_, err := c.MasterForKey(ctx, "")
		return err
	case *redis.Client:
		return probeNode(ctx, c.Options())
	}
	return l.client.Ping(ctx).Err()
}

// guard returns the breaker that guards the call req, or the error that
// fails the call at once.
func (l *redisBackend) guard(ctx context.Context, req *ratelimit.Request) (*breaker, error) {
	if l.breaker == nil {
		return nil, nil
	}
	if !l.breaker.allow() {
		return nil, ratelimit.ErrCircuitOpen
	}
	if l.cluster == nil {
		return l.breaker, nil
	}
	// Every key of a call has the same hash tag, so the first names the
	// master of them all.
	return l.guardMaster(ctx, storageKey(l.prefix, req.Name, keyOf(req, 0), 0, algorithmOf(req.Limits[0])))
}

// guardMaster returns the breaker of the cluster master that holds key,
// or the error that fails the call at once.
func (l *redisBackend) guardMaster(ctx context.Context, key string) (*breaker, error) {
	master, err := l.cluster.MasterForKey(ctx, key)
	l.breaker.record(ctx, err)
	if err != nil {
		return nil, err
	}
	addr := master.Options().Addr
	b, loaded := l.nodes.Load(addr)
	if !loaded {
		b, _ = l.nodes.LoadOrStore(addr, l.newBreaker(addr, l.probeMaster(key)))
	}
	nb := b.(*breaker)
	if !nb.allow() {
		return nil, ratelimit.ErrCircuitOpen
	}
	return nb, nil
}

// newBreaker returns the limiter's breaker for node, which probe asks,
// or nil when breakers are off. When a probe finds Redis back, the
// breaker carries back what the fallback admitted (see [Limiter.carryOut]).
func (l *redisBackend) newBreaker(node string, probe func(context.Context) error) *breaker {
	b := newBreaker(l.settings.breaker, node, probe, l.breakerHook)
	if b != nil {
		b.bg = l.bg
		b.recover = l.recovered
		b.holdOpen = func() bool {
			c := l.carry
			return c.size() > 0 || c.settling.Load() > 0 || c.carrying.Load()
		}
	}
	return b
}

// recovered carries back what the fallback admitted, then, before the
// breaker closes, waits a longest backoff (and a little more), during which
// the fallback still decides, so that the other processes' probes find
// Redis back too and carry back theirs before this one lets Redis decide,
// and carries back what the fallback admitted meanwhile.
func (l *redisBackend) recovered(ctx context.Context) {
	c := l.carry
	// A carry-back on its way (started by a call, see carrySoon) holds
	// admissions it took: wait for it to charge them or keep them again.
	for c.carrying.Load() && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if c.size() == 0 {
		return
	}
	c.settling.Add(1)
	defer c.settling.Add(-1)
	l.carryOut(ctx)
	select {
	case <-time.After(l.settings.breaker.maxBackoff + stragglerWait):
	case <-ctx.Done():
	}
	for range 2 {
		if c.size() == 0 || ctx.Err() != nil {
			return
		}
		l.carryOut(ctx)
	}
}

// probeMaster returns the probe of a cluster master's breaker: a script on
// the master that holds key, a key it held when the breaker was made. Asking
// the cluster client for the master each time finds the node's current
// client, and a master that took over key's slot.
func (l *redisBackend) probeMaster(key string) func(context.Context) error {
	return func(ctx context.Context) error {
		master, err := l.cluster.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		return probeNode(ctx, master.Options())
	}
}

// Allow decides req, through the limiter's guards: the deny cache repeats
// a recent denial without asking Redis (see [WithDenyCache]). See
// [ratelimit.Limiter].
func (l *Limiter) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if l.denials != nil {
		return l.denials.Allow(ctx, req)
	}
	return l.redisBackend.Allow(ctx, req)
}

// Allow decides req in one EVALSHA, shared with concurrent calls when
// batching is on (see [WithBatching]). See [ratelimit.Limiter].
func (l *redisBackend) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, err
	}
	if req.Keys != nil {
		return l.allowKeys(ctx, &req)
	}
	req.Key = callkey.Bound(req.Key)
	b, err := l.guard(ctx, &req)
	if err != nil {
		return ratelimit.Decision{}, l.failed(ctx, req, err)
	}
	var d ratelimit.Decision
	if l.batcher != nil {
		d, err = l.batcher.allow(ctx, &req)
	} else {
		d, err = l.decide(ctx, &req)
	}
	if b != nil {
		b.record(ctx, err)
	}
	if err != nil {
		return ratelimit.Decision{}, l.failed(ctx, req, err)
	}
	l.carrySoon()
	if l.cfg.Hook != nil {
		l.decided(ctx, req, d)
	}
	return d, nil
}

// DenySlack is how much shorter than its RetryAfter the deny cache holds
// a denial of a call of limits (see [guard.DenySlacker]): a millisecond
// when a window's script may have told it from the start of the server's
// millisecond, else nothing. The cache asks only without
// [ratelimit.WithClock], whose clock the scripts read to the µs.
func (l *redisBackend) DenySlack(limits []ratelimit.Limit) time.Duration {
	for _, lim := range limits {
		if alg := algorithmOf(lim); alg == ratelimit.FixedWindow || alg == ratelimit.SlidingWindow {
			return time.Millisecond
		}
	}
	return 0
}

// decided reports d, the decision of req, to the hook. It takes req by
// value, so that only a limiter with a hook moves a request to the heap.
func (l *redisBackend) decided(ctx context.Context, req ratelimit.Request, d ratelimit.Decision) {
	seen := hookRequest(&req)
	l.cfg.Hook.Decided(ctx, &seen, d)
}

// hookRequest returns req as a hook sees it: as its caller could build it,
// without what Rule.Check keeps in it.
func hookRequest(req *ratelimit.Request) ratelimit.Request {
	return ratelimit.Request{Name: req.Name, Key: req.Key, Keys: req.Keys, Cost: req.Cost, Limits: req.Limits}
}

// failed reports a call the limiter could not decide because of cause.
func (l *redisBackend) failed(ctx context.Context, req ratelimit.Request, cause error) error {
	err := &ratelimit.BackendError{Name: req.Name, Err: cause}
	if l.cfg.Hook != nil {
		seen := hookRequest(&req)
		l.cfg.Hook.Failed(ctx, &seen, err)
	}
	return err
}

// Key returns the Redis key that holds limit index i, of algorithm alg,
// of the calls named name with per-call key key, for inspecting state with
// redis-cli. A key whose escaped form is longer than 64 bytes appears as
// its stand-in (see [ratelimit.LimitError]'s Key).
func (l *redisBackend) Key(name, key string, i int, alg ratelimit.Algorithm) string {
	return storageKey(l.prefix, name, callkey.Bound(key), i, alg)
}

// The capabilities the limiter offers (see [ratelimit.As]).
var (
	_ ratelimit.Limiter    = (*Limiter)(nil)
	_ ratelimit.Peeker     = (*Limiter)(nil)
	_ ratelimit.Resetter   = (*Limiter)(nil)
	_ ratelimit.Reserver   = (*Limiter)(nil)
	_ ratelimit.SlotHolder = (*Limiter)(nil)
	_ ratelimit.Configured = (*Limiter)(nil)
	_ ratelimit.Fallback   = (*Limiter)(nil)
	_ guard.DenySlacker    = (*redisBackend)(nil)
)
