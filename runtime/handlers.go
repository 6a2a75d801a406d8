package ratelimit

import (
	"context"
	"time"
)

// Handlers carry out the operations of a limiter's [Limiter.Do]: one
// function per kind it carries out itself, nil for the others, which go
// to Next. A backend fills them once (Next nil), forwards Do to
// [Handlers.Do] and reports [Handlers.Ops] among its [Abilities]; a
// wrapper sets the kinds it intercepts and Next, the limiter it wraps.
// What each function does is its kind's doc (see [OpKind]).
type Handlers struct {
	// Next carries out the kinds without a function, when not nil.
	Next        Limiter
	Plan        func(r *Rule) Plan
	Reserve     func(ctx context.Context, req Request) (Decision, time.Time, error)
	Adjust      func(ctx context.Context, req Request, at time.Time, delta int64) error
	Peek        func(ctx context.Context, req Request) (Decision, error)
	Reset       func(ctx context.Context, name, key string) error
	TakeSlot    func(ctx context.Context, req Request, slot Limit, token string) (Decision, time.Time, error)
	RenewSlot   func(ctx context.Context, req Request, slot Limit, token string) (bool, error)
	GiveSlot    func(ctx context.Context, req Request, slot Limit, token string) error
	PeekSlot    func(ctx context.Context, req Request, slot Limit) (Decision, int64, error)
	Cool        func(ctx context.Context, req Request, line int, d time.Duration) error
	Cooling     func(ctx context.Context, req Request) (line int, left time.Duration, err error)
	Turn        func(ctx context.Context, req Request, ticket int64, wait time.Duration) (Decision, int64, time.Time, error)
	SlotTurn    func(ctx context.Context, req Request, slot Limit, token string, ticket int64, wait time.Duration) (Decision, int64, time.Time, error)
	Dequeue     func(ctx context.Context, req Request, ticket int64) error
	Waiting     func(ctx context.Context, req Request) (int, time.Duration, error)
	CountDenial func(name, key string, hashed bool)
	TopDenied   func(ctx context.Context, n int) ([]DeniedKey, error)
	Fallback    func(ctx context.Context, req Request) (Decision, []Limit, error)
	ReserveHeld func(ctx context.Context, req Request, hold time.Duration) (Decision, time.Time, error)
	RefundHeld  func(ctx context.Context, req Request, at time.Time, hold time.Duration, n int64) error
}

// Ops returns the kinds h has a function for (Next's not counted).
func (h *Handlers) Ops() Ops {
	var s Ops
	for k := OpPlan; k < opKinds; k++ {
		if h.has(k) {
			s |= 1 << k
		}
	}
	return s
}

// has reports whether h has a function for k.
func (h *Handlers) has(k OpKind) bool {
	if k <= OpPeekSlot {
		return h.hasCharge(k)
	}
	return h.hasOther(k)
}

// hasCharge is has of a kind up to OpPeekSlot.
func (h *Handlers) hasCharge(k OpKind) bool {
	switch k {
	case OpPlan:
		return h.Plan != nil
	case OpReserve:
		return h.Reserve != nil
	case OpAdjust:
		return h.Adjust != nil
	case OpPeek:
		return h.Peek != nil
	case OpReset:
		return h.Reset != nil
	case OpTakeSlot:
		return h.TakeSlot != nil
	case OpRenewSlot:
		return h.RenewSlot != nil
	case OpGiveSlot:
		return h.GiveSlot != nil
	case OpPeekSlot:
		return h.PeekSlot != nil
	}
	return false
}

// hasOther is has of a kind after OpPeekSlot.
func (h *Handlers) hasOther(k OpKind) bool {
	switch k {
	case OpCool:
		return h.Cool != nil
	case OpCooling:
		return h.Cooling != nil
	case OpTurn:
		return h.Turn != nil
	case OpSlotTurn:
		return h.SlotTurn != nil
	case OpDequeue:
		return h.Dequeue != nil
	case OpWaiting:
		return h.Waiting != nil
	case OpCountDenial:
		return h.CountDenial != nil
	case OpTopDenied:
		return h.TopDenied != nil
	case OpFallback:
		return h.Fallback != nil
	case OpReserveHeld:
		return h.ReserveHeld != nil
	case OpRefundHeld:
		return h.RefundHeld != nil
	}
	return false
}

// Do carries out op with its kind's function, or else with Next's Do, on
// behalf of limiter (whose error it is when neither can: see
// [Unsupported]). It takes op by address, so that a limiter's Do passes
// its own copy on without another.
func (h *Handlers) Do(ctx context.Context, limiter Limiter, op *Op) (res Result, err error) {
	if !h.has(op.Kind) {
		if h.Next != nil {
			return h.Next.Do(ctx, *op)
		}
		return res, Unsupported(limiter, op.Kind)
	}
	if op.Kind <= OpPeekSlot {
		return h.doCharges(ctx, op)
	}
	return h.doOthers(ctx, op)
}

// doCharges is Do of a kind up to OpPeekSlot: those that decide, charge
// or hold.
func (h *Handlers) doCharges(ctx context.Context, op *Op) (res Result, err error) {
	req := op.Request
	switch op.Kind {
	case OpPlan:
		res.Plan = h.Plan(req.Rule)
	case OpReserve:
		res.Decision, res.At, err = h.Reserve(ctx, req)
	case OpAdjust:
		err = h.Adjust(ctx, req, op.At, op.Units)
	case OpPeek:
		res.Decision, err = h.Peek(ctx, req)
	case OpReset:
		err = h.Reset(ctx, req.Name, req.Key)
	case OpTakeSlot:
		res.Decision, res.At, err = h.TakeSlot(ctx, req, op.Slot, op.Token)
	case OpRenewSlot:
		res.Held, err = h.RenewSlot(ctx, req, op.Slot, op.Token)
	case OpGiveSlot:
		err = h.GiveSlot(ctx, req, op.Slot, op.Token)
	case OpPeekSlot:
		res.Decision, res.Count, err = h.PeekSlot(ctx, req, op.Slot)
	}
	return res, err
}

// doOthers is Do of a kind after OpPeekSlot: cooldowns, queues, denials,
// the fallback and held charges.
func (h *Handlers) doOthers(ctx context.Context, op *Op) (res Result, err error) {
	req := op.Request
	switch op.Kind {
	case OpCool:
		err = h.Cool(ctx, req, op.Line, op.Wait)
	case OpCooling:
		res.Line, res.Left, err = h.Cooling(ctx, req)
	case OpTurn:
		res.Decision, res.Ticket, res.At, err = h.Turn(ctx, req, op.Ticket, op.Wait)
	case OpSlotTurn:
		res.Decision, res.Ticket, res.At, err = h.SlotTurn(ctx, req, op.Slot, op.Token, op.Ticket, op.Wait)
	case OpDequeue:
		err = h.Dequeue(ctx, req, op.Ticket)
	case OpWaiting:
		var n int
		n, res.Left, err = h.Waiting(ctx, req)
		res.Count = int64(n)
	case OpCountDenial:
		h.CountDenial(req.Name, req.Key, op.KeyHashed())
	case OpTopDenied:
		res.Denied, err = h.TopDenied(ctx, int(op.Units))
	case OpFallback:
		res.Decision, res.Limits, err = h.Fallback(ctx, req)
	case OpReserveHeld:
		res.Decision, res.At, err = h.ReserveHeld(ctx, req, op.Hold)
	case OpRefundHeld:
		err = h.RefundHeld(ctx, req, op.At, op.Hold, op.Units)
	}
	return res, err
}
