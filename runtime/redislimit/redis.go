package redislimit

import (
	"context"
	"errors"
	"fmt"
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
// options turn on, outermost first: the lease guard ([guard.Leases])
// admits the calls of a limit with a Prefetch from leases charged ahead,
// the deny cache ([guard.DenyCache]) answers before Redis is asked, the circuit breaker ([guard.Breaker])
// fails calls at once while Redis is down, and the local fallback
// ([guard.Fallback]) decides under [ratelimit.FailLocal] what Redis
// cannot, and carries its admissions back. Its methods
// that a guard intercepts (Allow, Peek, Reserve, Adjust, ReserveSlot,
// Reset) go through the guards; the others are the backend's.
type Limiter struct {
	*redisBackend
	can ratelimit.Abilities // what Abilities reports: its guards'
	// denials is the deny cache guard; nil when off.
	denials *guard.DenyCache
	// breakers is the circuit breaker guard; nil when off.
	breakers *guard.Breaker
	// fallback is the local fallback guard, with its carry-back and its
	// heartbeat.
	fallback *guard.Fallback
	// leases is the lease guard: it admits the calls of a limit with a
	// Prefetch from leases (see guard.Leases).
	leases *guard.Leases
	// leaveFence takes the fallback out of its client's fence (see
	// fence.go); nil when it is in none.
	leaveFence func()
}

// redisBackend is the Redis backend: it decides calls in Redis, and
// offers the guards what they need as guarded (or clusterBackend), the
// ForGuards of its Abilities.
type redisBackend struct {
	client redis.UniversalClient
	// cluster is client when it is a Redis Cluster client.
	cluster *redis.ClusterClient
	// batcher groups concurrent calls (see [WithBatching]); nil when off.
	batcher *batcher
	// probeKeys holds, for a cluster master, a key it held when its
	// breaker was made (see ProbeNode): address → string.
	probeKeys sync.Map
	// genericOnly makes the limiter decide calls of a single limit with
	// the generic decide script too; only tests set it, to check that
	// both scripts decide alike.
	genericOnly bool
	// denials are the process's denials not yet merged into Redis.
	denials denialLog
	ops     ratelimit.Handlers  // Do's
	can     ratelimit.Abilities // what Abilities reports
	cfg     ratelimit.Config
	settings
}

// guarded is what the Redis backend offers the guards of package guard
// (the ForGuards of its [ratelimit.Abilities]): the capabilities they
// need ([guard.Probed], [guard.Heartbeater], [guard.Carrier]), and its
// slack ([guard.WithDenySlack]).
type guarded struct{ *redisBackend }

// clusterBackend is the Redis backend of a cluster client as the guards
// see it: a backend of nodes ([guard.Probed.PerNode]), whose masters have
// breakers of their own.
type clusterBackend struct{ guarded }

// New returns a limiter that keeps its state in client's Redis. Its
// background work (the heartbeat it shares with the other limiters of
// client, its breakers' probes) runs until [Limiter.Close] or until client
// is closed.
func New(client redis.UniversalClient, opts ...Option) *Limiter {
	return newLimiter(client, opts, true)
}

// newLimiter returns the limiter New returns, in the heartbeat of its
// client and prefix when heartbeat is set (tests keep some limiters out).
func newLimiter(client redis.UniversalClient, options []Option, heartbeat bool) *Limiter {
	b := newBackend(client, options)
	// The guards read the options of package guard: those passed to New
	// and those that this package's options carry, in their order.
	opts := append(b.guards[:len(b.guards):len(b.guards)], guard.WithDenySlack(guarded{b}.DenySlack))
	if !heartbeat || client == nil {
		// No heartbeat: one process, unless the options say otherwise.
		opts = append([]guard.Option{guard.WithFallbackProcesses(1)}, opts...)
	}
	l := &Limiter{redisBackend: b}
	var f *fence
	if c, ok := client.(*redis.Client); ok && heartbeat {
		f = hookFence(c) // before Wrap starts the heartbeat, which dials
	}
	front := guard.Wrap(b, opts...)
	l.leases, _ = guard.Of[*guard.Leases](front)
	l.denials, _ = guard.Of[*guard.DenyCache](front) // nil when off
	l.breakers, _ = guard.Of[*guard.Breaker](front)  // nil when off
	l.fallback, _ = guard.Of[*guard.Fallback](front)
	l.can = l.leases.Abilities()
	l.can.Ops |= ratelimit.OpsOf(ratelimit.OpPlan)
	if f != nil {
		l.leaveFence = f.join(l.fallback)
	}
	return l
}

// Leases returns the limiter's lease guard: what it holds in leases, and
// how many calls it admitted from them.
func (l *Limiter) Leases() *guard.Leases { return l.leases }

// Held returns the units this process holds unused in the lease of the
// leased line of the calls of name whose key for that line is key (see
// [guard.Leases.Held]): charged in Redis, but admitted here, so in the
// Remaining of [Limiter.Peek] when the lease answers it.
func (l *Limiter) Held(name, key string) int64 { return l.leases.Held(name, key) }

// Peek tells how Allow would decide req now, charging nothing, through
// the lease guard: a call that a lease of this process would admit is
// answered from the lease ([guard.Leases.Peek]), any other by Redis (see
// [redisBackend.Peek]). See [ratelimit.Peek].
func (l *Limiter) Peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return l.leases.Peek(ctx, req)
}

// newBackend returns the Redis backend of New.
func newBackend(client redis.UniversalClient, opts []Option) *redisBackend {
	l := &redisBackend{client: client, cfg: ratelimit.NewConfig(opts...), settings: newSettings(opts)}
	l.cluster, _ = client.(*redis.ClusterClient)
	l.batcher = newBatcher(l, client, l.batch)
	l.ops = l.handlers()
	l.can = ratelimit.Abilities{Ops: l.ops.Ops(), SharesLines: true, Config: &l.cfg, ForGuards: guarded{l}}
	if l.cluster != nil {
		l.can.ForGuards = clusterBackend{guarded{l}}
	}
	return l
}

// Config returns the configuration the limiter was made with.
func (l *redisBackend) Config() *ratelimit.Config { return &l.cfg }

// Unwrap returns the limiter's outermost guard, its lease guard, in front
// of its deny cache, breaker and fallback (those that are on): so
// [guard.Of] finds them through it. Every call goes through Allow and Do.
func (l *Limiter) Unwrap() ratelimit.Limiter { return l.leases }

// Guards returns the limiter's guards, outermost first: its lease guard,
// deny cache, breaker and fallback, those that are on.
func (l *Limiter) Guards() []ratelimit.Limiter {
	var guards []ratelimit.Limiter
	if l.leases != nil {
		guards = append(guards, l.leases)
	}
	if l.denials != nil {
		guards = append(guards, l.denials)
	}
	if l.breakers != nil {
		guards = append(guards, l.breakers)
	}
	if l.fallback != nil {
		guards = append(guards, l.fallback)
	}
	return guards
}

// CircuitOpen reports whether a circuit breaker of the limiter is failing
// calls without asking Redis now (for a Redis Cluster, the calls of at
// least one master), as a health check may want to know.
func (l *Limiter) CircuitOpen() bool { return l.breakers != nil && l.breakers.CircuitOpen() }

// Circuits returns, for each circuit breaker of the limiter that is open
// now, its node (the client's address, or a cluster master's) and when it
// opened: empty while every call goes to Redis.
func (l *Limiter) Circuits() map[string]time.Time {
	if l.breakers == nil {
		return map[string]time.Time{}
	}
	return l.breakers.Circuits()
}

// AllowLocal decides req with the limiter's local fallback, against each
// process's share of its limits (see [WithFallbackProcesses]), and
// remembers an admitted call, to be charged to Redis when it answers again
// (see the package doc, Outages). See [guard.Fallback.AllowLocal] and
// [ratelimit.OpFallback].
func (l *Limiter) AllowLocal(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, []ratelimit.Limit, error) {
	return l.fallback.AllowLocal(ctx, req)
}

// CachedDenial returns how much longer the limiter's deny cache repeats a
// denial of req without asking Redis, and whether it holds one.
func (l *Limiter) CachedDenial(req ratelimit.Request) (time.Duration, bool) {
	if l.denials == nil {
		return 0, false
	}
	return l.denials.CachedDenial(req)
}

// Node names the client's breaker for a [ratelimit.BreakerHook]: its
// address, "cluster" for a cluster client (whose masters have breakers of
// their own), "ring" for a ring. See [guard.Probed].
func (l guarded) Node() string {
	switch c := l.client.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return "cluster"
	case *redis.Ring:
		return "ring"
	}
	return ""
}

// Probe asks Redis whether the limiter's breaker may close: with a script
// on a connection of its own, then through the client's pool (see
// [probeClient]), or for a cluster client
// by finding a master, which the breaker guards there. See [guard.Probed].
func (l guarded) Probe(ctx context.Context) error {
	var err error
	switch c := l.client.(type) {
	case *redis.ClusterClient:
		_, err = c.MasterForKey(ctx, "")
	case *redis.Client:
		err = probeClient(ctx, c)
	default:
		err = l.client.Ping(ctx).Err()
	}
	return closedError(err)
}

// Unavailable reports whether err means Redis could not be reached or
// cannot serve, rather than that it rejected this one call (see
// [redisUnavailable]). See [guard.Probed].
func (l guarded) Unavailable(err error) bool { return redisUnavailable(err) }

// PerNode reports false: a client that is not a cluster's is one node,
// with one breaker. See [guard.Probed].
func (guarded) PerNode() bool { return false }

// NodeOf fails wrapping errors.ErrUnsupported: the guards ask only a
// cluster's (PerNode). See [guard.Probed].
func (guarded) NodeOf(context.Context, ratelimit.Request, int) (string, error) {
	return "", errOneNode
}

// ProbeNode fails as NodeOf does. See [guard.Probed].
func (guarded) ProbeNode(context.Context, string) error { return errOneNode }

// errOneNode says that a client that is not a cluster's has no nodes to
// tell apart.
var errOneNode = fmt.Errorf("redislimit: the client is one node: %w", errors.ErrUnsupported)

// PerNode reports true: each master of the cluster has a breaker of its
// own. See [guard.Probed].
func (clusterBackend) PerNode() bool { return true }

// NodeOf returns the address of the cluster master that holds the key of
// req's limit i. Every key of a call with one key has the same hash tag,
// so the first names the master of them all. See [guard.Probed].
func (l clusterBackend) NodeOf(ctx context.Context, req ratelimit.Request, i int) (string, error) {
	key := l.nodeKey(&req, i)
	master, err := l.cluster.MasterForKey(ctx, key)
	if err != nil {
		return "", err
	}
	addr := master.Options().Addr
	if _, ok := l.probeKeys.Load(addr); !ok {
		l.probeKeys.LoadOrStore(addr, key)
	}
	return addr, nil
}

// nodeKey returns the storage key of req's limit i, of its first limit's
// when it has none (a call of concurrency slots alone, whose key has the
// same hash tag).
func (l *redisBackend) nodeKey(req *ratelimit.Request, i int) string {
	var lim ratelimit.Limit
	if i < len(req.Limits) {
		lim = req.Limits[i]
	}
	key := callkey.Bound(req.Key)
	if req.Keys != nil {
		key = callkey.Bound(req.Keys[i])
	}
	name, j := req.Line(i)
	return storageKey(l.prefix, name, key, j, lim.AlgorithmOrDefault())
}

// ProbeNode asks a cluster master whether it runs scripts and serves
// keys: with a script, then EXISTS of a key it held when its breaker was
// made, on the master that holds that key.
// Asking the cluster client for the master each time finds the node's
// current client, and a master that took over the key's slot. See
// [guard.Probed].
func (l clusterBackend) ProbeNode(ctx context.Context, node string) error {
	key, ok := l.probeKeys.Load(node)
	if !ok {
		return errors.New("redislimit: no key of node " + node)
	}
	master, err := l.cluster.MasterForKey(ctx, key.(string))
	if err == nil {
		err = probeClient(ctx, master)
	}
	if err == nil {
		// A master back from a restart answers scripts before it serves
		// keys (CLUSTERDOWN): its breaker closes once it serves them, so
		// that the marks the fallback then writes there find what it lost.
		err = master.Exists(ctx, key.(string)).Err()
	}
	return closedError(err)
}

// Allow decides req, through the limiter's guards: the deny cache repeats
// a recent denial without asking Redis (see [WithDenyCache]). See
// [ratelimit.Limiter].
func (l *Limiter) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return l.leases.Allow(ctx, req)
}

// Allow decides req in one EVALSHA, shared with concurrent calls when
// batching is on (see [WithBatching]). See [ratelimit.Limiter].
func (l *redisBackend) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, err
	}
	if req.Keys != nil {
		keyed := req // escapes, unlike req: calls of one key allocate nothing for it
		return l.allowKeys(ctx, &keyed)
	}
	req.Key = callkey.Bound(req.Key)
	var d ratelimit.Decision
	var err error
	if l.batcher != nil {
		d, err = l.batcher.allow(ctx, &req)
	} else {
		d, err = l.decide(ctx, &req)
	}
	if err != nil {
		return ratelimit.Decision{}, l.failed(ctx, req, err)
	}
	if l.cfg.Hook != nil {
		l.decided(ctx, req, d)
	}
	return d, nil
}

// DenySlack is how much shorter than its RetryAfter the deny cache holds
// a denial of a call of limits (see [guard.WithDenySlack]): a millisecond
// when a limit's own script, reading the server's clock lazily (a
// window's), may have told it from the start of the server's millisecond,
// else nothing. The cache asks only without
// [ratelimit.WithClock], whose clock the scripts read to the µs.
func (l guarded) DenySlack(limits []ratelimit.Limit) time.Duration {
	for _, lim := range limits {
		if lazyClock(lim.AlgorithmOrDefault()) {
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
// and its rule, without what Rule.Check keeps in it.
func hookRequest(req *ratelimit.Request) ratelimit.Request {
	return ratelimit.Request{Name: req.Name, Key: req.Key, Keys: req.Keys, Shared: req.Shared, Cost: req.Cost, Limits: req.Limits, Rule: req.Rule}
}

// failed reports a call the limiter could not decide because of cause.
func (l *redisBackend) failed(ctx context.Context, req ratelimit.Request, cause error) error {
	err := backendError(req.Name, cause)
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

// What the limiter and its backend are: the contract, and what the guards
// need of the backend.
var (
	_ ratelimit.Limiter = (*Limiter)(nil)
	_ guard.Probed      = guarded{}
	_ guard.Carrier     = guarded{}
	_ guard.Heartbeater = guarded{}
	_ guard.Probed      = clusterBackend{}
)
