package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// retryAfterOf returns the retry time carried by err: that of the first
// error in err's chain (see [errors.As]) with a method
//
//	RetryAfter() time.Duration
//
// such as httplimit's UpstreamError or the gRPC adapter's RetryError,
// capped at [MaxCooldown]. ok is false when no error of the chain has the
// method, or its retry time is not positive. A [*LimitError], whose
// RetryAfter is a field, is no such error: a limit further in denying a
// call does not cool the lines before it.
func retryAfterOf(err error) (d time.Duration, ok bool) {
	var ra interface{ RetryAfter() time.Duration }
	if err == nil || !errors.As(err, &ra) {
		return 0, false
	}
	d = ra.RetryAfter()
	if d <= 0 {
		return 0, false
	}
	return min(d, MaxCooldown), true
}

// Cooldown records on limiter ([OpCool]) that the calls of r's line (the
// index of the limit in r.Limits, which must be marked [Limit.Cooldown])
// with key are denied for d, such as an upstream's Retry-After read with
// [Rule.CooldownOn]: until then every call of the line's key, in every
// process sharing the limiter's state, is denied with a [*LimitError]
// whose RetryAfter is the cooldown's end (or waits for it, within r.Wait).
// A cooldown never shortens a longer one, and d is capped at
// [MaxCooldown]; a d that is not positive does nothing. Cooldown runs on
// a context detached from ctx's cancellation, with its own timeout (as
// settles do). A limiter that keeps no cooldowns records nothing: Cooldown then
// returns an error wrapping [errors.ErrUnsupported]; a failure of the
// backend an error wrapping [ErrBackend], also told to its hook.
func (r *Rule) Cooldown(ctx context.Context, limiter Limiter, line int, key string, d time.Duration) error {
	if line < 0 || line >= len(r.Limits) || !r.Limits[line].Cooldown {
		return fmt.Errorf("%w: %s: limit %d has no cooldown", ErrInvalidLimit, r.Name, line)
	}
	if d <= 0 {
		return nil
	}
	if !can(limiter, OpCool) {
		return fmt.Errorf("ratelimit: %s: limiter %T keeps no cooldowns (no OpCool): %w", r.Name, limiter, errors.ErrUnsupported)
	}
	req := r.coolRequest(line, key)
	ctx, cancel := detached(ctx)
	defer cancel()
	_, err := limiter.Do(ctx, Op{Kind: OpCool, Request: req, Line: line, Wait: min(d, MaxCooldown)})
	if err != nil {
		if c := configOf(limiter); c != nil && c.Hook != nil {
			c.Hook.Failed(ctx, &req, err)
		}
	}
	return err
}

// coolRequest is the request naming r's line with key: r's limits, the
// line's key at its index (a rule with a key per limit) or as the key.
func (r *Rule) coolRequest(line int, key string) Request {
	req := Request{Name: r.Name, Key: key, Limits: r.Limits, Shared: r.Shared, Rule: r}
	if r.KeyExprs != nil {
		req.Key = ""
		req.Keys = make([]string, len(r.Limits))
		req.Keys[line] = key
	}
	return req
}

// cools reports whether any of limits is marked Cooldown.
func cools(limits []Limit) bool {
	for i := range limits {
		if limits[i].Cooldown {
			return true
		}
	}
	return false
}

// cooling returns the denial of a call of req (whose keys are the call's,
// against r) while one of r's lines cools, and whether one does. The
// cooldowns are asked of limiter ([OpCooling]) against r's own limits, so an
// override keeps the line's cooldown; the denial names the cooling limit
// of req (req.Limits), with Remaining 0 and the cooldown's end as its
// RetryAfter and ResetAfter. A limiter that keeps no cooldowns, or one that
// fails to tell (its hook is told), leaves the call to the limits.
func (r *Rule) cooling(ctx context.Context, limiter Limiter, req *Request) (Decision, bool) {
	if !cools(r.Limits) {
		return Decision{}, false
	}
	return r.coolingOf(ctx, limiter, req)
}

// coolingOf is cooling of a rule with a cooldown line.
func (r *Rule) coolingOf(ctx context.Context, limiter Limiter, req *Request) (Decision, bool) {
	if !can(limiter, OpCooling) {
		if _, logged := coolUnsupported.LoadOrStore(r, true); !logged {
			slog.Default().Warn("ratelimit: cooldown unsupported: the limiter keeps no cooldowns (no OpCooling); its calls are decided without them",
				"name", r.Name, "limiter", fmt.Sprintf("%T", limiter))
		}
		return Decision{}, false
	}
	ask := Request{Name: r.Name, Key: req.Key, Keys: req.Keys, Limits: r.Limits, Shared: r.Shared, Rule: r}
	i, left, err := coolingOf(ctx, limiter, ask)
	if err != nil {
		if c := configOf(limiter); c != nil && c.Hook != nil {
			c.Hook.Failed(ctx, &ask, err)
		}
		return Decision{}, false
	}
	if i < 0 || left <= 0 {
		return Decision{}, false
	}
	d := Decision{RetryAfter: left, ResetAfter: left, LimitIndex: r.indexIn(i, req.Limits), Source: SourceCooldown}
	if c := configOf(limiter); c != nil && c.Hook != nil {
		seen := Request{Name: req.Name, Key: callkey.Bound(req.Key), Keys: req.Keys, Cost: req.Cost, Limits: req.Limits, Shared: req.Shared, Rule: req.Rule}
		c.Hook.Decided(ctx, &seen, d)
	}
	return d, true
}

// indexIn returns the index in limits, a call's limits, of r's limit i:
// i itself, unless limits are the rate limits of a rule with a
// concurrency limit, without it (see Rule.Reserve).
func (r *Rule) indexIn(i int, limits []Limit) int {
	if len(limits) == len(r.Limits) {
		return i
	}
	j := 0
	for _, l := range r.Limits[:i] {
		if !isConcurrency(l) {
			j++
		}
	}
	return min(j, len(limits)-1)
}

// coolUnsupported holds the rules (*Rule) whose calls were logged as
// decided without their cooldowns, so that each is logged once.
var coolUnsupported sync.Map

// CooldownOn is what a decorator generated for a method with a cooldown
// line calls when the method returns err: when err carries a retry time
// ([Rule.CooldownOn]), it cools each of r's lines marked [Limit.Cooldown]
// with its key, as keys keyed the call (as for [Rule.Check]: one key for
// every line, or a key per line), for that long (see [Rule.Cooldown]). It
// returns nil when err carries none, else the first error of the lines'
// Cooldowns.
func (r *Rule) CooldownOn(ctx context.Context, limiter Limiter, err error, keys ...string) error {
	d, ok := retryAfterOf(err)
	if !ok {
		return nil
	}
	key, lines, kerr := r.split(keys)
	if kerr != nil {
		return kerr
	}
	var first error
	for i, l := range r.Limits {
		if !l.Cooldown {
			continue
		}
		k := key
		if lines != nil {
			k = lines[i]
		}
		if err := r.Cooldown(ctx, limiter, i, k, d); err != nil && first == nil {
			first = err
		}
	}
	return first
}
