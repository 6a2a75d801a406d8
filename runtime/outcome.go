package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// outcome is what check learnt about one call.
type outcome struct {
	// d is the last decision made for the call.
	d Decision
	// limits are the limits it was decided against.
	limits []Limit
	// decided is false when no decision was made (the call went through
	// on a failure, or failed).
	decided bool
	// perLimit is set for a call with a key per limit.
	perLimit bool
}

// pace sleeps delay, an admitted call's.
func (r *Rule) pace(ctx context.Context, delay time.Duration) error {
	if delay <= 0 || r.Shadow {
		return nil
	}
	if err := sleepCtx(ctx, delay); err != nil {
		return fmt.Errorf("ratelimit: %s: admitted, but %w while paced for %s", r.Name, err, delay)
	}
	return nil
}

// sleepCtx waits for d or until ctx ends, returning ctx.Err() then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// limitError describes the denial d of req.
func (r *Rule) limitError(req *Request, d Decision) *LimitError {
	e := &LimitError{
		Name:       r.Name,
		Key:        callkey.Bound(req.Key),
		Remaining:  max(d.Remaining, 0), // negative: a debt (see Reservation)
		RetryAfter: d.RetryAfter,
		ResetAfter: d.ResetAfter,
		Source:     d.Source,
	}
	if i := d.LimitIndex; i >= 0 && i < len(req.Limits) {
		e.Limit = req.Limits[i]
		if req.Keys != nil && i < len(req.Keys) {
			e.Key = callkey.Bound(req.Keys[i])
			if i < len(r.KeyExprs) {
				e.KeyExpr = r.KeyExprs[i]
			}
		}
		if i < len(req.Shared) {
			e.Line = req.Shared[i]
		}
	}
	return e
}

// denied has limiter count the denial e by r's limit i, if it counts
// denials ([OpCountDenial]; through its plan when it has one), and
// returns e.
func (r *Rule) denied(limiter Limiter, e *LimitError, i int) *LimitError {
	if f := r.keptFast(limiter); f != nil && f.count != nil {
		f.count(e.Key, hashed(r.KeyHash, i))
	} else if can(limiter, OpCountDenial) {
		op := Op{Kind: OpCountDenial, Request: Request{Name: r.Name, Key: e.Key, Rule: r}, Line: i}
		_, _ = limiter.Do(context.Background(), op)
	}
	return e
}

// verdict answers a call that an override exempts (v is [Unlimited]) or
// blocks ([Block]) without asking the limiter. A blocked call is denied
// with a [*LimitError] whose Limit is the Block limit over the period of
// the rule's first limit (the rest of its window, for a calendar period),
// which is also its RetryAfter (the override is
// asked again on the next call); the limiter's hook sees the denial, with
// [SourceOverride].
//
// For a call with a key per limit, line is the limit whose key's override
// gave the verdict (the hook sees that key, the error its expression), -1
// when the rule's override did.
func (r *Rule) verdict(ctx context.Context, limiter Limiter, req *Request, v Algorithm, line int) error {
	if v == Unlimited {
		return nil
	}
	period := r.Limits[0].blockSpan(limiter)
	d := Decision{RetryAfter: period, ResetAfter: period, Source: SourceOverride}
	blocked := *req
	blocked.Limits = []Limit{{Algorithm: Block, Period: period}}
	if req.Keys != nil {
		blocked.Key, blocked.Keys = "", nil
		if line >= 0 {
			blocked.Key = req.Keys[line]
		}
	}
	if c := configOf(limiter); c != nil && c.Hook != nil {
		seen := Request{Name: req.Name, Key: callkey.Bound(blocked.Key), Cost: req.Cost, Limits: blocked.Limits, Rule: req.Rule}
		c.Hook.Decided(ctx, &seen, d)
	}
	if r.Shadow {
		return nil
	}
	e := r.limitError(&blocked, d)
	if line >= 0 && line < len(r.KeyExprs) {
		e.KeyExpr = r.KeyExprs[line]
	}
	return r.denied(limiter, e, line)
}
