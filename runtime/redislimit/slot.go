package redislimit

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The concurrency slot scripts as rendered (see lua/slot.lua.tmpl).
var (
	reserveSlotText   = renderScript("reserve slot", scriptData{Generic: true})
	renewSlotText     = renderScript("renew slot", scriptData{Generic: true})
	reserveSlotScript = redis.NewScript(sendable(reserveSlotText))
	renewSlotScript   = redis.NewScript(sendable(renewSlotText))
)

// slotKey returns the Redis key of the concurrency slots of req's name and
// key: a sorted set beside the rate limits' keys, with their hash tag,
// such as ratelimit:{svc.Store.Get:alice}:slots.
func (l *redisBackend) slotKey(req *ratelimit.Request) string {
	return slotKey(l.prefix, req.Name, req.Key)
}

// slotKey returns the Redis key of the concurrency slots of name and key.
func slotKey(prefix, name, key string) string {
	k := storageKey(prefix, name, key, 0, ratelimit.SlidingLog)
	return strings.TrimSuffix(k, "0:log") + "slots"
}

// ReserveSlot takes a concurrency slot of slot under token and decides
// req's rate limits, through the limiter's guards (the deny cache notes
// the call's time, see [guard.DenyCache]). See [redisBackend.ReserveSlot].
func (l *Limiter) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	return l.leases.ReserveSlot(ctx, req, slot, token)
}

// ReserveSlot takes a concurrency slot of slot under token and decides
// req's rate limits (there may be none), all or nothing, in one EVALSHA
// of the reserve slot script. It is not batched. See
// [ratelimit.Rule.Reserve]. It tells its hook nothing: the rule does.
func (l *redisBackend) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	d, at, err := l.reserveSlot(ctx, req, slot, token)
	return d, time.UnixMicro(at), err
}

// reserveSlot is ReserveSlot, with the time in µs since the Unix epoch.
func (l *redisBackend) reserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, int64, error) {
	if len(req.Limits) > 0 {
		if err := req.Validate(); err != nil {
			return ratelimit.Decision{}, 0, err
		}
	}
	req.Key = callkey.Bound(req.Key)
	res, err := l.reserveSlotRun(ctx, &req, slot, token, nil)
	if t, skewed := calendarSkew(err); skewed {
		res, err = l.reserveSlotRun(ctx, &req, slot, token, &t)
	}
	var d ratelimit.Decision
	var at int64
	if err == nil {
		d, at, err = parseReserved(res)
	}
	if err != nil {
		return ratelimit.Decision{}, 0, l.failed(ctx, req, err)
	}
	return d, at, nil
}

// reserveSlotRun runs the reserve slot script for req, with the bounds of
// its calendar periods around at (µs), or when at is nil around its time
// (see [Limiter.boundsTime]).
func (l *redisBackend) reserveSlotRun(ctx context.Context, req *ratelimit.Request, slot ratelimit.Limit, token string, at *int64) (any, error) {
	now := l.now()
	keys := []string{l.slotKey(req)}
	args := []any{slot.Threshold, lease(slot).Microseconds(), token}
	if len(req.Limits) > 0 {
		keys, args = l.appendCallAt(keys, args, req, now, l.boundsTime(now, at))
	} else {
		args = append(args, now)
	}
	return reserveSlotScript.Run(ctx, l.client, keys, args...).Result()
}

// ReleaseSlot gives back the slot held under token: one ZREM. When it
// fails, the error is told to the hook (Failed) and returned, and the
// slot frees when its lease ends, as the reservation no longer renews it.
func (l *redisBackend) ReleaseSlot(ctx context.Context, req ratelimit.Request, _ ratelimit.Limit, token string) error {
	req.Key = callkey.Bound(req.Key)
	if err := l.client.ZRem(ctx, l.slotKey(&req), token).Err(); err != nil {
		return l.failed(ctx, req, err)
	}
	return nil
}

// RenewSlot renews the lease of the slot held under token, and reports
// whether it still held it: one EVALSHA of the renew slot script.
func (l *redisBackend) RenewSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (bool, error) {
	req.Key = callkey.Bound(req.Key)
	n, err := renewSlotScript.Run(ctx, l.client, []string{l.slotKey(&req)}, lease(slot).Microseconds(), token, l.now()).Int()
	if err != nil {
		return false, l.failed(ctx, req, err)
	}
	return n == 1, nil
}

// PeekSlot returns the decision ReserveSlot would return now, charging
// and taking nothing, and how many slots are held now: one EVALSHA of the
// reserve slot script, asked to peek. It bypasses the circuit breaker and
// the deny cache, as Peek does. See [ratelimit.Peek].
func (l *redisBackend) PeekSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit) (ratelimit.Decision, int64, error) {
	if len(req.Limits) > 0 {
		if err := req.Validate(); err != nil {
			return ratelimit.Decision{}, 0, err
		}
	}
	req.Key = callkey.Named(req.Key)
	run := func(at *int64) (any, error) {
		now := l.now()
		keys := []string{l.slotKey(&req)}
		args := []any{slot.Threshold, lease(slot).Microseconds(), ""}
		if len(req.Limits) > 0 {
			var call []any
			keys, call = l.appendCallAt(keys, nil, &req, now, l.boundsTime(now, at))
			args = append(args, withPeek(call, len(req.Limits))...)
		} else {
			args = append(args, now)
		}
		return reserveSlotScript.Run(ctx, l.client, keys, args...).Result()
	}
	res, err := run(nil)
	if t, skewed := calendarSkew(err); skewed {
		res, err = run(&t)
	}
	var d ratelimit.Decision
	var held int64
	if err == nil {
		d, held, err = parseReserved(res)
	}
	if err != nil {
		return ratelimit.Decision{}, 0, backendError(req.Name, err)
	}
	return d, held, nil
}

// lease returns the lease of a concurrency limit (see ratelimit.Limit).
func lease(slot ratelimit.Limit) time.Duration {
	if slot.Period == 0 {
		return limitfacts.DefaultLease
	}
	return slot.Period
}
