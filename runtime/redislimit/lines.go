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

// A call with a key per limit (ratelimit.Request's Keys) keeps limit i's
// state in storageKey(prefix, name, Keys[i], index, alg) where
// req.Line(i) puts it (name and i but for a shared line): limits
// that share a name and key share a hash tag, and keep the keys a call
// with that one key would; a shared line (ratelimit.Request's Shared)
// keeps its state under its own name, which every rule with the line
// shares.
//
// On a single server (or behind Sentinel) one generic script run decides
// every limit, whatever their hash tags. On a Redis Cluster (or a Ring)
// the limits are grouped by key, so each group's keys share a hash tag,
// and each group is decided atomically by the generic script with records
// (decide.lua.tmpl, Lines), the groups concurrently. When every group
// admits the call it is admitted; when one denies it (or fails), each
// group that admitted it is refunded by refund.lua.tmpl, so a denied call
// leaves no charge once Allow returns. No group charges a call it does
// not admit, so no call is admitted that one atomic decision of all
// limits would deny; a concurrent call may be denied by a charge that is
// then refunded (see the package doc, Keys).
var (
	linesText    = renderScript("decide.lua.tmpl", scriptData{Generic: true, Lines: true})
	linesScript  = redis.NewScript(sendable(linesText))
	refundText   = renderScript("refund.lua.tmpl", scriptData{Generic: true})
	refundScript = redis.NewScript(sendable(refundText))
)

// keyOf returns the key of limit i of req: Keys[i], or Key when req has
// one key for all.
func keyOf(req *ratelimit.Request, i int) string {
	if req.Keys != nil {
		return req.Keys[i]
	}
	return req.Key
}

// boundKeys returns keys bounded by bound (callkey.Bound or Named), in a
// new slice: the caller's is not changed.
func boundKeys(keys []string, bound func(string) string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = bound(k)
	}
	return out
}

// grouped reports whether the limiter's keys may live on several nodes,
// so that a call whose limits have different keys is decided per group.
func (l *redisBackend) grouped() bool {
	if l.cluster != nil {
		return true
	}
	_, ring := l.client.(*redis.Ring)
	return ring
}

// lineGroup is the limits of a call with a key per limit that share a key,
// and what their script run told.
type lineGroup struct {
	idx  []int    // the limits' indices in the request
	keys []string // their storage keys
	d    ratelimit.Decision
	recs []any // the records of an admitted call, three per limit
	err  error
}

// groupsOf returns the limits of req grouped by name and key, in the order of
// their first limit, or nil when they all share one key.
func (l *redisBackend) groupsOf(req *ratelimit.Request) []*lineGroup {
	var groups []*lineGroup
	for i, lim := range req.Limits {
		var g *lineGroup
		for _, h := range groups {
			if req.Keys[h.idx[0]] == req.Keys[i] && sameName(req, h.idx[0], i) {
				g = h
				break
			}
		}
		if g == nil {
			g = &lineGroup{}
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
		name, j := req.Line(i)
		g.keys = append(g.keys, storageKey(l.prefix, name, req.Keys[i], j, lim.AlgorithmOrDefault()))
	}
	if len(groups) == 1 {
		return nil
	}
	return groups
}

// allowKeys is Allow for a valid request with a key per limit. The deny
// cache is not asked: it remembers denials by name and key, and a call
// with a key per limit is decided by the states of several keys, which
// calls with other keys change. Batching applies on a single server,
// whose batches take any keys.
func (l *redisBackend) allowKeys(ctx context.Context, req *ratelimit.Request) (ratelimit.Decision, error) {
	req.Keys = boundKeys(req.Keys, callkey.Bound)
	req.Key = callkey.Bound(req.Key)
	var d ratelimit.Decision
	var err error
	var groups []*lineGroup
	if l.grouped() {
		groups = l.groupsOf(req)
	}
	if groups != nil {
		d, err = l.decideGroups(ctx, req, groups, false)
	} else if l.batcher != nil {
		d, err = l.batcher.allow(ctx, req)
	} else {
		d, err = l.decide(ctx, req)
	}
	if err != nil {
		return ratelimit.Decision{}, l.failed(ctx, *req, err)
	}
	if l.cfg.Hook != nil {
		l.decided(ctx, *req, d)
	}
	return d, nil
}

// decideGroups decides req, whose limits are in groups on several hash
// tags: each group with one run of the script with records, concurrently;
// when any denies the call or fails, the groups that admitted it are
// refunded. With peek set, nothing is charged and nothing refunded. When
// groups fail, the error is a [guard.PartError] saying which, so that a
// breaker records each group's outcome on the breaker of its master.
func (l *redisBackend) decideGroups(ctx context.Context, req *ratelimit.Request, groups []*lineGroup, peek bool) (ratelimit.Decision, error) {
	mode := ""
	if peek {
		mode = "peek"
	}
	return l.decideGroupsAt(ctx, req, groups, l.now(), mode)
}

// decideGroupsAt is decideGroups at now, the scripts' time argument ("":
// each master's own clock), in mode, the generic script's argument after
// the limits': "", "peek", or a hold in µs (see ReserveHeld).
func (l *redisBackend) decideGroupsAt(ctx context.Context, req *ratelimit.Request, groups []*lineGroup, now any, mode string) (ratelimit.Decision, error) {
	peek := mode == "peek"
	var wg sync.WaitGroup
	for _, g := range groups[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.runGroup(ctx, req, g, now, mode)
		}()
	}
	l.runGroup(ctx, req, groups[0], now, mode)
	wg.Wait()

	var err error
	var failed map[int]error
	allowed := true
	for _, g := range groups {
		if g.err != nil {
			if err == nil {
				err, failed = g.err, map[int]error{}
			}
			failed[g.idx[0]] = classify(g.err)
		}
		allowed = allowed && g.err == nil && g.d.Allowed
	}
	if !allowed && !peek {
		l.refund(context.WithoutCancel(ctx), req, groups)
	}
	if err != nil {
		return ratelimit.Decision{}, &guard.PartError{Err: classify(err), Failed: failed}
	}
	return combine(groups), nil
}

// runGroup runs g's script for req at now (the generic script's time
// argument) in mode (see decideGroupsAt), setting g's decision and
// records, or its error.
func (l *redisBackend) runGroup(ctx context.Context, req *ratelimit.Request, g *lineGroup, now any, mode string) {
	peek := mode == "peek"
	limits := make([]ratelimit.Limit, len(g.idx))
	for j, i := range g.idx {
		limits[j] = req.Limits[i]
	}
	script := linesScript
	if peek {
		script = decideScript
	}
	run := func(at int64) (any, error) {
		args := appendLimits(append(make([]any, 0, 3+4*len(limits)), now, req.Units()), limits, at)
		if mode != "" {
			args = withArg(args, 2+4*len(limits), mode)
		}
		return script.Run(ctx, l.client, g.keys, args...).Result()
	}
	res, err := run(l.boundsTime(now, nil))
	if at, skewed := calendarSkew(err); skewed {
		res, err = run(at)
	}
	if err != nil {
		g.err = err
		return
	}
	g.d, g.recs, g.err = parseLines(res, len(g.idx))
	if g.err == nil {
		g.d.LimitIndex = g.idx[g.d.LimitIndex]
	}
}

// parseLines decodes the reply of the script with records for n limits:
// a decision, and for an admitted call the limits' records, as the refund
// script takes them back.
func parseLines(res any, n int) (ratelimit.Decision, []any, error) {
	v, ok := res.([]any)
	if !ok || len(v) < 6 {
		d, err := parseDecision(res) // a peek's packed reply
		return d, nil, err
	}
	d, err := parseDecision(v[:6])
	if err != nil || !d.Allowed || len(v) == 6 {
		if err == nil && (d.LimitIndex < 0 || d.LimitIndex >= n) {
			err = &replyError{n: len(v)}
		}
		return d, nil, err
	}
	if len(v) != 6+3*n || d.LimitIndex < 0 || d.LimitIndex >= n {
		return ratelimit.Decision{}, nil, &replyError{n: len(v)}
	}
	recs := v[6:]
	for j, r := range recs {
		switch r.(type) {
		case int64, string:
		case nil:
			recs[j] = ""
		default:
			return ratelimit.Decision{}, nil, &replyError{n: len(v)}
		}
	}
	return d, recs, nil
}

// combine returns the decision of a call from its groups' decisions, as
// one decision of all limits makes it (see MemoryLimiter): when denied,
// the denying limit with the longest RetryAfter (the first of them);
// when admitted, the limit with the fewest remaining units (the first of
// them), with the longest delay of all.
func combine(groups []*lineGroup) ratelimit.Decision {
	var d ratelimit.Decision
	found := false
	for _, g := range groups {
		if !g.d.Allowed && (!found || d.Allowed || g.d.RetryAfter > d.RetryAfter ||
			g.d.RetryAfter == d.RetryAfter && g.d.LimitIndex < d.LimitIndex) {
			d, found = g.d, true
		}
	}
	if found {
		d.Delay = 0
		return d
	}
	var delay time.Duration
	for _, g := range groups {
		delay = max(delay, g.d.Delay)
		if !found || g.d.Remaining < d.Remaining || g.d.Remaining == d.Remaining && g.d.LimitIndex < d.LimitIndex {
			d, found = g.d, true
		}
	}
	d.Delay = delay
	return d
}

// refund takes back the charges of the groups of req that admitted it,
// each with one run of the refund script, concurrently; best effort: a
// refund that fails leaves its charge, to lapse with its window.
func (l *redisBackend) refund(ctx context.Context, req *ratelimit.Request, groups []*lineGroup) {
	now := l.now()
	var wg sync.WaitGroup
	for _, g := range groups {
		if g.err != nil || !g.d.Allowed || g.recs == nil {
			continue
		}
		args := make([]any, 0, 2+7*len(g.idx))
		args = append(args, now, req.Units())
		for j, i := range g.idx {
			lim := req.Limits[i]
			args = append(args, string(lim.AlgorithmOrDefault()), lim.Period.Microseconds(), thresholdArg(lim), lim.MaxCost())
			args = append(args, g.recs[3*j:3*j+3]...)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = refundScript.Run(ctx, l.client, g.keys, args...).Err()
		}()
	}
	wg.Wait()
}

// peekKeys is Peek for a valid request with a key per limit.
func (l *redisBackend) peekKeys(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	req.Keys = boundKeys(req.Keys, callkey.Named)
	var groups []*lineGroup
	if l.grouped() {
		groups = l.groupsOf(&req)
	}
	if groups == nil {
		return l.peekOne(ctx, &req)
	}
	d, err := l.decideGroups(ctx, &req, groups, true)
	if err != nil {
		return ratelimit.Decision{}, backendError(req.Name, err)
	}
	if d.Allowed {
		d.Remaining += req.UnitsOf(d.LimitIndex)
	}
	return d, nil
}

// sameName reports whether limits i and j of req keep their state under
// one name (see ratelimit.Request.Line).
func sameName(req *ratelimit.Request, i, j int) bool {
	a, _ := req.Line(i)
	b, _ := req.Line(j)
	return a == b
}

// lineIndex returns the index of limit i's state under its name (see
// ratelimit.Request.Line).
func lineIndex(req *ratelimit.Request, i int) int {
	_, j := req.Line(i)
	return j
}
