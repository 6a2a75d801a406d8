package redislimit

import (
	"context"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Do carries out op through the limiter's guards, outermost first: the
// lease guard, the deny cache, the breaker and the fallback (see
// [guard.Wrap] for what each does with an operation), then Redis. It
// answers OpPlan itself (see [Limiter.plan]). See [ratelimit.Limiter].
func (l *Limiter) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	if op.Kind == ratelimit.OpPlan {
		return ratelimit.Result{Plan: l.plan(op.Request.Rule)}, nil
	}
	return l.leases.Do(ctx, op)
}

// plan returns the limiter's fast path for r's calls: Decide is Allow's
// request made without a Request, and CountDenial counts in the process
// as Do's OpCountDenial does, past guards that only pass it on.
func (l *Limiter) plan(r *ratelimit.Rule) ratelimit.Plan {
	if r == nil {
		return ratelimit.Plan{}
	}
	return ratelimit.Plan{
		By: l,
		Decide: func(ctx context.Context, key string, cost int64) (ratelimit.Decision, error) {
			return l.leases.Allow(ctx, ratelimit.Request{Name: r.Name, Key: key, Cost: cost, Limits: r.Limits, Rule: r})
		},
		CountDenial: func(key string, hashed bool) { l.CountDenial(r.Name, key, hashed) },
	}
}

// Abilities reports every operation of the contract, shared lines (a
// call with a key per limit keeps limit i's state where req.Line(i) says,
// in one script run on a single server or Sentinel, and in groups of one
// hash tag each on a Cluster), the limiter's Config, and what its Redis
// backend offers the guards (ForGuards), so guards put around it (or
// around a wrapper of it) probe, carry back to and count the processes of
// the same Redis. See [ratelimit.Limiter].
func (l *Limiter) Abilities() ratelimit.Abilities { return l.can }

// Do carries out op in Redis, without guards: what the guards pass on.
// See [ratelimit.Limiter].
func (l *redisBackend) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return l.ops.Do(ctx, l, &op)
}

// Abilities reports what the backend carries out in Redis, and what it
// offers the guards (guarded, or clusterBackend for a cluster client).
// See [ratelimit.Limiter].
func (l *redisBackend) Abilities() ratelimit.Abilities { return l.can }

// handlers returns the functions of the backend's Do.
func (l *redisBackend) handlers() ratelimit.Handlers {
	return ratelimit.Handlers{
		Reserve: l.Reserve, Adjust: l.Adjust, Peek: l.Peek, Reset: l.Reset,
		TakeSlot: l.ReserveSlot, RenewSlot: l.RenewSlot, GiveSlot: l.ReleaseSlot, PeekSlot: l.PeekSlot,
		Cool: l.Cool, Cooling: l.Cooling,
		Turn: l.allowInTurn, SlotTurn: l.reserveSlotInTurn, Dequeue: l.Dequeue, Waiting: l.waiting,
		CountDenial: l.CountDenial, TopDenied: l.TopDenied,
		ReserveHeld: l.ReserveHeld, RefundHeld: l.RefundHeld,
	}
}
