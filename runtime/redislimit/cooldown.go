package redislimit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The cooldown scripts (lua/cooldown.lua.tmpl; README.md there).
var (
	coolText      = renderScript("cool", scriptData{})
	coolingText   = renderScript("cooling", scriptData{})
	coolScript    = redis.NewScript(sendable(coolText))
	coolingScript = redis.NewScript(sendable(coolingText))
)

// coolKey returns the cooldown key of limit index i of name and key
// (bounded): beside the limit's state, with its hash tag,
//
//	<prefix>{<name>:<key>}:<i>:cool
func coolKey(prefix, name, key string, i int) string {
	k := storageKey(prefix, name, key, i, ratelimit.SlidingLog)
	return strings.TrimSuffix(k, "log") + "cool"
}

// lineCoolKey returns the cooldown key of req's limit i: that of the
// state [ratelimit.Request.Line] names, under the limit's key.
func (l *redisBackend) lineCoolKey(req *ratelimit.Request, i int) string {
	name, j := req.Line(i)
	return coolKey(l.prefix, name, callkey.Named(keyOf(req, i)), j)
}

// Cool records in Redis that req's limit i cools for d, in one script
// run on the server's clock (or the limiter's [ratelimit.WithClock]): a
// later end replaces the one recorded, a sooner one changes nothing; the
// key expires a second after the end. It bypasses the guards; an error
// wraps [ratelimit.ErrBackend]. See [ratelimit.OpCool].
func (l *redisBackend) Cool(ctx context.Context, req ratelimit.Request, i int, d time.Duration) error {
	if i < 0 || i >= len(req.Limits) || (req.Keys != nil && len(req.Keys) != len(req.Limits)) {
		return fmt.Errorf("%w: %s: no limit %d to cool", ratelimit.ErrInvalidLimit, req.Name, i)
	}
	if d <= 0 {
		return nil
	}
	us := min(d, ratelimit.MaxCooldown).Microseconds()
	if err := coolScript.Run(ctx, l.client, []string{l.lineCoolKey(&req, i)}, l.now(), us).Err(); err != nil {
		return backendError(req.Name, err)
	}
	return nil
}

// Cooling asks Redis which of req's lines marked [ratelimit.Limit.Cooldown]
// cools longest, in one script run (on a cluster, one per line when they
// have several hash tags). An error wraps [ratelimit.ErrBackend]. See
// [ratelimit.OpCool].
func (l *redisBackend) Cooling(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	if req.Keys != nil && len(req.Keys) != len(req.Limits) {
		return -1, 0, fmt.Errorf("%w: %s: %d keys for %d limits", ratelimit.ErrInvalidLimit, req.Name, len(req.Keys), len(req.Limits))
	}
	var keys []string
	var lines []int
	for i, lim := range req.Limits {
		if lim.Cooldown {
			keys = append(keys, l.lineCoolKey(&req, i))
			lines = append(lines, i)
		}
	}
	if len(keys) == 0 {
		return -1, 0, nil
	}
	groups := [][]string{keys}
	if l.cluster != nil && len(keys) > 1 {
		groups = groups[:0]
		for _, k := range keys {
			groups = append(groups, []string{k})
		}
	}
	now := l.now()
	pick, left := -1, int64(0)
	for g, group := range groups {
		res, err := coolingScript.Run(ctx, l.client, group, now).Int64Slice()
		if err != nil {
			return -1, 0, backendError(req.Name, err)
		}
		if len(res) != 2 {
			return -1, 0, &ratelimit.BackendError{Name: req.Name, Err: fmt.Errorf("cooling script replied %v", res)}
		}
		if res[0] > 0 && res[1] > left {
			first := 0
			if len(groups) > 1 {
				first = g
			}
			pick, left = lines[first+int(res[0])-1], res[1]
		}
	}
	if pick < 0 {
		return -1, 0, nil
	}
	return pick, time.Duration(left) * time.Microsecond, nil
}

// Cooling is the backend's Cooling, through the guards: while a circuit
// breaker of the limiter is open it fails at once with an error wrapping
// [ratelimit.ErrCircuitOpen], so that a call of a rule with a cooldown
// line does not wait for an unreachable Redis before its policy decides
// it (see [ratelimit.OpCooling]).
func (l *Limiter) Cooling(ctx context.Context, req ratelimit.Request) (int, time.Duration, error) {
	res, err := l.Do(ctx, ratelimit.Op{Kind: ratelimit.OpCooling, Request: req})
	return res.Line, res.Left, err
}
