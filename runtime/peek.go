package ratelimit

import (
	"context"
)

// Peek asks limiter how it would decide req now ([OpPeek], or
// [OpPeekSlot] for a request with a concurrency limit); the error wraps
// errors.ErrUnsupported when it cannot tell.
//
// Peek returns the decision Allow would return for req now, without
// charging any limit: Allowed, RetryAfter, Delay and LimitIndex as Allow's,
// and ResetAfter as Allow's (for an admitted call, counting the call).
// Remaining is the units the limit at LimitIndex has left now, before
// the call: Allow's Remaining plus the cost when admitted (after 2 of
// 3 calls, a Peek of cost 1 admits with 1 remaining). It reports
// nothing to the limiter's hook.
//
// Of a request with a concurrency limit, Peek decides the slot with
// the rate limits in one step, as [Rule.Reserve] would (each limiter
// holding slots answers this way, and [Peek] for any): a call denied
// for want of a slot has the slot's LimitIndex, RetryAfter when the
// soonest lease ends and ResetAfter when the last does; an admitted
// call has the slot's LimitIndex when the slot is its tightest limit
// (fewer slots left after the call than the rate limits' Remaining,
// or no rate limits), with Remaining the slots free now and
// ResetAfter the lease.
//
// req.Key may also be the stand-in of a long key, as [LimitError]'s
// Key shows it, which peeks at that key.
//
// A Peek changes no later decision. Like Allow, it drops what no longer
// counts at its time (a log's old entries, an ended window), as a
// later call would; only a clock that steps back ([WithClock], in
// tests) could tell the difference. (The lease guard, guard.Leases,
// answers as its Allow would, from this process's lease of a limit
// with a [Limit.Prefetch]; a Peek its lease cannot serve ends that
// lease, as the call would, which never admits more.)
func Peek(ctx context.Context, limiter Limiter, req Request) (Decision, error) {
	if hasSlot(req.Limits) {
		return peekSlot(ctx, limiter, req)
	}
	res, err := limiter.Do(ctx, Op{Kind: OpPeek, Request: req})
	return res.Decision, err
}

// Reset has limiter clear the state that r's calls of key keep: every
// limit of r's name under key, concurrency slots too (the calls holding
// them run on, and their give-back finds nothing to give), so that the
// next call starts afresh ([OpReset]; key may also be the stand-in of a
// long key, as [LimitError]'s Key shows it). The error wraps
// errors.ErrUnsupported when limiter cannot. (For another name, such as a
// shared line's, send OpReset with that name.)
func (r *Rule) Reset(ctx context.Context, limiter Limiter, key string) error {
	_, err := limiter.Do(ctx, Op{Kind: OpReset, Request: Request{Name: r.Name, Key: key}})
	return err
}

// Peek tells how limiter would decide a call of r with keys (as for
// [Rule.Check]) and cost 1 now, without charging it: against r's limits
// or their overrides, as a call would be (see [Peek]; an override that
// exempts or blocks the call answers as the call would be answered). A
// limit that has all its units has ResetAfter 0. Of a rule with Wait
// while calls wait on the key, it tells what a new call would be told
// behind them, not decided: Source [SourceQueue], Remaining 0 (the units
// there are the waiting calls'), and RetryAfter the soonest it could be
// admitted (see [OpTurn]); on a limiter that queues no calls, the denial
// the calls waiting in this process were told last.
func (r *Rule) Peek(ctx context.Context, limiter Limiter, keys ...string) (Decision, error) {
	key, lines, err := r.split(keys)
	if err != nil {
		return Decision{}, err
	}
	if lines == nil {
		return r.peek(ctx, limiter, Request{Name: r.Name, Key: key, Limits: r.oneKeyLimits(ctx, limiter, key)})
	}
	if err := r.canShare(limiter, lines); err != nil {
		return Decision{}, err
	}
	limits, _ := r.lineLimits(ctx, limiter, lines)
	return r.peek(ctx, limiter, Request{Name: r.Name, Keys: lines, Limits: limits, Shared: r.Shared})
}

// peek is Peek of req, whose limits are r's effective ones.
func (r *Rule) peek(ctx context.Context, limiter Limiter, req Request) (Decision, error) {
	if _, slot, ok, err := splitSlot(r.Name, r.Limits); err != nil || ok {
		if err != nil {
			return Decision{}, err
		}
		req.Limits = withSlot(req.Limits, slot)
	}
	limits := req.Limits
	switch verdictOf(limits) {
	case Unlimited:
		return Decision{Allowed: true, Source: SourceOverride}, nil
	case Block:
		period := r.Limits[0].blockSpan(limiter)
		return Decision{RetryAfter: period, ResetAfter: period, Source: SourceOverride}, nil
	}
	if d, ok := r.cooling(ctx, limiter, &req); ok {
		return d, nil
	}
	if r.Wait > 0 && !r.Shadow {
		if d, queued, err := r.peekQueue(ctx, limiter, req); err != nil || queued {
			return d, err
		}
	}
	d, err := Peek(ctx, limiter, req)
	if err != nil {
		return Decision{}, err
	}
	if d.LimitIndex >= 0 && d.LimitIndex < len(limits) && d.Remaining >= limits[d.LimitIndex].MaxCost() {
		d.ResetAfter = 0
	}
	return d, nil
}

// withSlot returns the effective limits of a rule whose concurrency limit
// is slot as [Rule.Reserve] decides them: overrides change the rate
// limits only, so the slot is kept where the limits have one (else put
// last), and an override that exempts the key from its rate limits
// leaves the slot alone.
func withSlot(limits []Limit, slot Limit) []Limit {
	if verdictOf(limits) == Unlimited {
		return []Limit{slot}
	}
	if verdictOf(limits) == Block {
		return limits
	}
	out := make([]Limit, 0, len(limits)+1)
	kept := false
	for _, l := range limits {
		if isConcurrency(l) {
			if kept {
				continue
			}
			l, kept = slot, true
		}
		out = append(out, l)
	}
	if !kept {
		out = append(out, slot)
	}
	return out
}
