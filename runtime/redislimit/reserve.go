package redislimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// reserveText and adjustText are the reserve and adjust scripts as
// rendered (see lua/reserve.lua.tmpl and lua/adjust.lua.tmpl): the generic
// decide script that also replies the time it charged at, and the script
// that settles a reservation.
var (
	reserveText   = renderScript("reserve.lua.tmpl", scriptData{Generic: true})
	adjustText    = renderScript("adjust.lua.tmpl", scriptData{Generic: true})
	reserveScript = redis.NewScript(sendable(reserveText))
	adjustScript  = redis.NewScript(sendable(adjustText))
)

// Reserve is Allow, through the limiter's guards (the deny cache answers
// and remembers its denials as Allow's), also returning the time at which
// an admitted call was charged. See [redisBackend.Reserve] and
// [ratelimit.Rule.Reserve].
func (l *Limiter) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	return l.leases.Reserve(ctx, req)
}

// Adjust changes the charge of req, which [Limiter.Reserve] admitted at
// the time at, by delta units, through the limiter's guards: it makes the
// limiter's deny cache forget the name's denials, as a refund may admit
// what the cache holds denied and a charge on top makes a denial's retry
// later than the cache would tell. Other processes' caches hold theirs up
// to their deny hold ([WithDenyHold]), as after a Reset there: a denial
// repeated after a refund elsewhere, or a retry told too early, which
// Redis then denies again. See [redisBackend.Adjust].
func (l *Limiter) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	return l.leases.Adjust(ctx, req, at, delta)
}

// Reserve is Allow, also returning the time (µs since the Unix epoch, on
// the server's clock or the limiter's [ratelimit.WithClock]) at which an
// admitted call was charged, for [Limiter.Adjust]: one EVALSHA of the
// reserve script, which decides as the generic decide script does. It is
// not batched (see [WithBatching]): its reply carries the time the
// settle needs, which a batch's does not, and a reservation's round trip
// is one per call that a settle ends, not the steady stream of decisions
// batching is for. On a Redis Cluster, a request with a key per limit
// whose limits are on several hash tags is decided per hash tag, all at
// one time (see reserveGroups). See [ratelimit.Rule.Reserve].
func (l *redisBackend) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	d, at, err := l.reserve(ctx, req)
	return d, time.UnixMicro(at), err
}

// ReserveHeld is Reserve, except that the units it charges to each
// SlidingLog limit weigh until hold past a period after the time it
// charged them at: the reserve script logs them in a held entry (see
// check sliding_log in lua/sliding_log.lua.tmpl), whose twin is
// [ratelimit.MemoryLimiter.ReserveHeld]. See [ratelimit.OpReserveHeld].
func (l *redisBackend) ReserveHeld(ctx context.Context, req ratelimit.Request, hold time.Duration) (ratelimit.Decision, time.Time, error) {
	if err := validHold(&req, hold); err != nil {
		return ratelimit.Decision{}, time.Time{}, err
	}
	d, at, err := l.reserveMode(ctx, req, strconv.FormatInt(hold.Microseconds(), 10))
	return d, time.UnixMicro(at), err
}

// RefundHeld takes back up to n units that [redisBackend.ReserveHeld]
// charged to req at the time at with hold: the adjust script's refund of
// the entries held with hold (see settle sliding_log in
// lua/sliding_log_settle.lua.tmpl), whose twin is
// [ratelimit.MemoryLimiter.RefundHeld]. See [ratelimit.OpReserveHeld].
func (l *redisBackend) RefundHeld(ctx context.Context, req ratelimit.Request, at time.Time, hold time.Duration, n int64) error {
	if err := validHold(&req, hold); err != nil || n <= 0 {
		return err
	}
	return l.adjustMode(ctx, req, at.UnixMicro(), -n, strconv.FormatInt(hold.Microseconds(), 10))
}

// validHold returns the error of a held reservation of req with hold (see
// [ratelimit.OpReserveHeld]): a positive hold that each limit kept in a log
// (SlidingLog) can take (see limitfacts.CheckHold), as the memory
// limiter's does.
func validHold(req *ratelimit.Request, hold time.Duration) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if hold <= 0 {
		return fmt.Errorf("%w: %s: a hold of %v", ratelimit.ErrInvalidLimit, req.Name, hold)
	}
	for _, lim := range req.Limits {
		if factsOf(lim).State != limitfacts.Log {
			continue
		}
		if err := limitfacts.CheckHold(hold, lim.Period, lim.PerCall, req.Units()); err != nil {
			return fmt.Errorf("%w: %s: %w", ratelimit.ErrInvalidLimit, req.Name, err)
		}
	}
	return nil
}

// reserve is Reserve, with the time in µs since the Unix epoch.
func (l *redisBackend) reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, int64, error) {
	return l.reserveMode(ctx, req, "")
}

// reserveMode is reserve, passing the generic script mode, its argument
// after the limits': "", or a hold in µs (see ReserveHeld).
func (l *redisBackend) reserveMode(ctx context.Context, req ratelimit.Request, mode string) (ratelimit.Decision, int64, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, 0, err
	}
	req.Key = callkey.Bound(req.Key)
	if req.Keys != nil {
		req.Keys = boundKeys(req.Keys, callkey.Bound)
		if l.grouped() {
			if groups := l.groupsOf(&req); groups != nil {
				return l.reserveGroups(ctx, req, groups, mode)
			}
		}
	}
	res, err := l.reserveRun(ctx, &req, nil, mode)
	if t, skewed := calendarSkew(err); skewed {
		res, err = l.reserveRun(ctx, &req, &t, mode)
	}
	var d ratelimit.Decision
	var at int64
	if err == nil {
		d, at, err = parseReserved(res)
	}
	if err != nil {
		return ratelimit.Decision{}, 0, l.failed(ctx, req, err)
	}
	if l.cfg.Hook != nil {
		l.decided(ctx, req, d)
	}
	return d, at, nil
}

// reserveGroups is reserve of req, whose limits are in groups on several
// hash tags of a Redis Cluster (or a Ring), which no one script run can
// take: the groups are decided all or nothing as Allow decides them (see
// decideGroups), all at one time, which Adjust then finds each limit's
// charge at: the limiter's clock's ([ratelimit.WithClock]), else the
// server time of the master of req's last limit, read first (a lease of
// guard.Leases charges its line last, behind stand-ins).
func (l *redisBackend) reserveGroups(ctx context.Context, req ratelimit.Request, groups []*lineGroup, mode string) (ratelimit.Decision, int64, error) {
	now := l.now()
	if now == "" {
		last := groups[0]
		for _, g := range groups {
			if slices.Contains(g.idx, len(req.Limits)-1) {
				last = g
			}
		}
		t, err := l.serverTime(ctx, last.keys[0])
		if err != nil {
			return ratelimit.Decision{}, 0, l.failed(ctx, req, err)
		}
		now = t
	}
	d, err := l.decideGroupsAt(ctx, &req, groups, now, mode)
	if err != nil {
		return ratelimit.Decision{}, 0, l.failed(ctx, req, err)
	}
	if l.cfg.Hook != nil {
		l.decided(ctx, req, d)
	}
	return d, now.(int64), nil
}

// serverTimeScript replies the time of the master of its key, in µs (see
// lua/server_time.lua.tmpl).
var (
	serverTimeText   = renderScript("server_time.lua.tmpl", scriptData{})
	serverTimeScript = redis.NewScript(sendable(serverTimeText))
)

// serverTime returns the time, in µs since the Unix epoch, on the clock
// of the master that holds key.
func (l *redisBackend) serverTime(ctx context.Context, key string) (int64, error) {
	return serverTimeScript.Run(ctx, l.client, []string{key}).Int64()
}

// reserveRun runs the reserve script for req in mode (see reserveMode),
// with the bounds of its calendar periods around at (µs), or when at is
// nil around its time (see [Limiter.boundsTime]).
func (l *redisBackend) reserveRun(ctx context.Context, req *ratelimit.Request, at *int64, mode string) (any, error) {
	now := l.now()
	keys := make([]string, 0, len(req.Limits))
	args := make([]any, 0, 2+4*len(req.Limits))
	keys, args = l.appendCallAt(keys, args, req, now, l.boundsTime(now, at))
	if mode != "" {
		args = withArg(args, 2+4*len(req.Limits), mode)
	}
	return reserveScript.Run(ctx, l.client, keys, args...).Result()
}

// parseReserved decodes the reserve script's reply: {decision, now}.
func parseReserved(res any) (ratelimit.Decision, int64, error) {
	v, ok := res.([]any)
	if !ok || len(v) != 2 {
		return ratelimit.Decision{}, 0, &replyError{n: 1}
	}
	at, ok := v[1].(int64)
	if !ok {
		return ratelimit.Decision{}, 0, &replyError{n: 2}
	}
	d, err := parseDecision(v[0])
	return d, at, err
}

// Adjust changes the charge of req, which [Limiter.Reserve] admitted at
// the time at, by delta units without deciding anything: one EVALSHA of
// the adjust script (lua/adjust.lua.tmpl), whose twin is
// [ratelimit.MemoryLimiter.Adjust], or on a Redis Cluster one per hash tag
// of a request with a key per limit (see adjustRun). It is not batched. See [ratelimit.Reservation] for what it does per algorithm.
func (l *redisBackend) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	return l.adjust(ctx, req, at.UnixMicro(), delta)
}

// adjust is Adjust, with the time in µs since the Unix epoch.
func (l *redisBackend) adjust(ctx context.Context, req ratelimit.Request, at, delta int64) error {
	return l.adjustMode(ctx, req, at, delta, "")
}

// adjustMode is adjust, passing the adjust script hold, its argument
// after the limits': "", or a refund's hold in µs (see RefundHeld).
func (l *redisBackend) adjustMode(ctx context.Context, req ratelimit.Request, at, delta int64, hold string) error {
	if err := req.Validate(); err != nil || delta == 0 {
		return err
	}
	req.Key = callkey.Bound(req.Key)
	if req.Keys != nil {
		req.Keys = boundKeys(req.Keys, callkey.Bound)
	}
	// A refund's calendar bounds are around at, which they always hold; a
	// charge on top's around now, which a skew may have them miss.
	now, around := l.now(), at
	if delta > 0 {
		around = l.boundsTime(now, nil)
	}
	if err := l.adjustRun(ctx, &req, now, at, delta, around, hold); err != nil {
		return l.failed(ctx, req, err)
	}
	return nil
}

// adjustRun runs the adjust script for req at now (see [Limiter.now]),
// with the bounds of its calendar periods around the time around (µs), or
// around the time a run's calendar-skew error tells (that run again).
// Each limit's state is where a decision keeps it (storageKey of
// [ratelimit.Request.Line] and the limit's key): on a Redis Cluster (or a
// Ring) the limits are grouped as allowKeys groups them, one run per
// group, so that the keys of a run share a hash tag, all or nothing: a
// run that fails has the runs before it changed back. A limit that counts
// calls ([ratelimit.Limit.PerCall]) is left as it is: a settle changes
// what the call cost, not that it was made.
func (l *redisBackend) adjustRun(ctx context.Context, req *ratelimit.Request, now any, at, delta, around int64, hold string) error {
	var groups [][]int // the indices of the limits of each run
	for i, lim := range req.Limits {
		if lim.PerCall {
			continue
		}
		g := -1
		for h, idx := range groups {
			if !l.grouped() || keyOf(req, idx[0]) == keyOf(req, i) && sameName(req, idx[0], i) {
				g = h
				break
			}
		}
		if g < 0 {
			g, groups = len(groups), append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	for n, idx := range groups {
		if err := l.adjustGroup(ctx, req, idx, now, at, delta, around, hold); err != nil {
			// All or nothing: the groups changed before are changed back,
			// best effort, as a denied call's charges are (see refund).
			for _, done := range groups[:n] {
				_ = l.adjustGroup(context.WithoutCancel(ctx), req, done, now, at, -delta, around, hold)
			}
			return err
		}
	}
	return nil
}

// adjustGroup runs the adjust script on the limits idx of req, whose keys
// share a hash tag, with the bounds of their calendar periods around the
// time around (µs), or around the time a run's calendar-skew error tells
// (that run again).
func (l *redisBackend) adjustGroup(ctx context.Context, req *ratelimit.Request, idx []int, now any, at, delta, around int64, hold string) error {
	keys := make([]string, len(idx))
	limits := make([]ratelimit.Limit, len(idx))
	for n, i := range idx {
		name, j := req.Line(i)
		keys[n] = storageKey(l.prefix, name, keyOf(req, i), j, req.Limits[i].AlgorithmOrDefault())
		limits[n] = req.Limits[i]
	}
	run := func(around int64) error {
		args := make([]any, 0, 3+4*len(limits))
		args = append(args, now, strconv.FormatInt(delta, 10), strconv.FormatInt(at, 10))
		args = appendLimitsFrom(args, 4, limits, around)
		if hold != "" {
			args = withArg(args, 3+4*len(limits), hold)
		}
		return adjustScript.Run(ctx, l.client, keys, args...).Err()
	}
	err := run(around)
	if t, skewed := calendarSkew(err); skewed {
		err = run(t)
	}
	return err
}
