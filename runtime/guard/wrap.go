package guard

import (
	"context"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Wrap returns backend behind the guards of this package, as the options
// of this package among opts configure them, outermost first: the lease
// guard ([Leases], which leases only limits with a Prefetch, and answers
// Peek as its Allow would decide), the deny
// cache ([DenyCache], unless WithDenyCache(0)), the circuit breaker
// ([Breaker], around a [Probed] backend, unless WithBreaker(0, 0, 0)) and
// the local fallback ([Fallback], which carries back around a [Carrier]
// backend and counts the processes around a [Heartbeater] one). It
// returns them as a limiter that offers exactly the capabilities backend
// offers (a [ratelimit.Reserver], [ratelimit.SlotHolder] or
// [ratelimit.Resetter] only when backend is one, found with As, the
// lease guard's [ratelimit.Peeker] when backend peeks, and every
// other capability of backend through Unwrap), and the fallback's
// ([ratelimit.Fallback]). Pass it the options backend was made with, so
// that the guards read the same settings, and [Close] the limiter it
// returns when done with it.
func Wrap(backend ratelimit.Limiter, opts ...Option) ratelimit.Limiter {
	fb := NewFallback(backend, opts...)
	l := offer(fb, backend)
	if b := NewBreaker(l, opts...); b != nil {
		fb.Guarded(b)
		l = offer(b, backend)
	}
	if c := NewDenyCache(l, opts...); c != nil {
		l = offer(c, backend)
	}
	return offerLeases(NewLeases(l, opts...), backend)
}

// offerLeases is offer of the lease guard, which also offers its
// [ratelimit.Peeker] when backend peeks and takes reservations (around
// another backend it leases nothing, and the backend's Peek, found
// through Unwrap, answers as it would).
func offerLeases(g *Leases, backend ratelimit.Limiter) ratelimit.Limiter {
	_, peeks := ratelimit.As[ratelimit.Peeker](backend)
	_, reserves := ratelimit.As[ratelimit.Reserver](backend)
	if !peeks || !reserves {
		return offer(g, backend)
	}
	_, holds := ratelimit.As[ratelimit.SlotHolder](backend)
	_, resets := ratelimit.As[ratelimit.Resetter](backend)
	b, r, s, x, p := base{g}, reservePart{g}, slotPart{g}, resetPart{g}, peekPart{g}
	switch {
	case holds && resets:
		return struct {
			base
			reservePart
			slotPart
			resetPart
			peekPart
		}{b, r, s, x, p}
	case holds:
		return struct {
			base
			reservePart
			slotPart
			peekPart
		}{b, r, s, p}
	case resets:
		return struct {
			base
			reservePart
			resetPart
			peekPart
		}{b, r, x, p}
	}
	return struct {
		base
		reservePart
		peekPart
	}{b, r, p}
}

// peekPart is the lease guard's [ratelimit.Peeker].
type peekPart struct{ g *Leases }

// Peek passes the call to the guard.
func (p peekPart) Peek(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return p.g.Peek(ctx, req)
}

// Close stops the background work of the guards of limiter, a limiter
// that [Wrap] returned: it ends the leases (giving back what they did
// not use), the probes of its breakers, the carry-back and
// the heartbeat of its fallback. It does not close the backend.
func Close(limiter ratelimit.Limiter) {
	if g, ok := Of[*Leases](limiter); ok {
		g.Close()
	}
	if b, ok := Of[*Breaker](limiter); ok {
		b.Close()
	}
	if f, ok := Of[*Fallback](limiter); ok {
		f.Close()
	}
}

// Holder is a limiter that holds guards without being a
// [ratelimit.Wrapper] of them, such as redislimit.Limiter, which offers
// the guards' methods itself: [Of] looks among its Guards too.
type Holder interface {
	// Guards returns the guards the limiter holds, outermost first.
	Guards() []ratelimit.Limiter
}

// Of returns the guard of type G in limiter's chain of wrappers (such as
// the *DenyCache of a limiter [Wrap] made) or among the guards of a
// [Holder] in it, and whether there is one.
func Of[G ratelimit.Limiter](limiter ratelimit.Limiter) (G, bool) {
	for limiter != nil {
		if g, ok := limiter.(G); ok {
			return g, true
		}
		if h, ok := limiter.(Holder); ok {
			for _, held := range h.Guards() {
				if g, ok := Of[G](held); ok {
					return g, true
				}
			}
		}
		if o, ok := limiter.(interface{ guard() ratelimit.Limiter }); ok {
			if g, ok := o.guard().(G); ok {
				return g, true
			}
		}
		w, ok := limiter.(ratelimit.Wrapper)
		if !ok {
			break
		}
		limiter = w.Unwrap()
	}
	var none G
	return none, false
}

// full is a guard that implements every capability it may intercept,
// failing those its backend does not offer.
type full interface {
	ratelimit.Wrapper
	ratelimit.Reserver
	ratelimit.SlotHolder
	ratelimit.Resetter
}

// offer returns g as a limiter that offers the capabilities of backend
// among those g intercepts, and no other, and the fallback's own when g is
// the fallback guard.
func offer(g full, backend ratelimit.Limiter) ratelimit.Limiter {
	_, reserves := ratelimit.As[ratelimit.Reserver](backend)
	_, holds := ratelimit.As[ratelimit.SlotHolder](backend)
	_, resets := ratelimit.As[ratelimit.Resetter](backend)
	f, local := g.(*Fallback)
	b := base{g}
	r, s, x, lp := reservePart{g}, slotPart{g}, resetPart{g}, localPart{f}
	switch {
	case reserves && holds && resets && local:
		return struct {
			base
			reservePart
			slotPart
			resetPart
			localPart
		}{b, r, s, x, lp}
	case reserves && holds && resets && !local:
		return struct {
			base
			reservePart
			slotPart
			resetPart
		}{b, r, s, x}
	case reserves && holds && !resets && local:
		return struct {
			base
			reservePart
			slotPart
			localPart
		}{b, r, s, lp}
	case reserves && holds && !resets && !local:
		return struct {
			base
			reservePart
			slotPart
		}{b, r, s}
	case reserves && !holds && resets && local:
		return struct {
			base
			reservePart
			resetPart
			localPart
		}{b, r, x, lp}
	case reserves && !holds && resets && !local:
		return struct {
			base
			reservePart
			resetPart
		}{b, r, x}
	case reserves && !holds && !resets && local:
		return struct {
			base
			reservePart
			localPart
		}{b, r, lp}
	case reserves && !holds && !resets && !local:
		return struct {
			base
			reservePart
		}{b, r}
	case !reserves && holds && resets && local:
		return struct {
			base
			slotPart
			resetPart
			localPart
		}{b, s, x, lp}
	case !reserves && holds && resets && !local:
		return struct {
			base
			slotPart
			resetPart
		}{b, s, x}
	case !reserves && holds && !resets && local:
		return struct {
			base
			slotPart
			localPart
		}{b, s, lp}
	case !reserves && holds && !resets && !local:
		return struct {
			base
			slotPart
		}{b, s}
	case !reserves && !holds && resets && local:
		return struct {
			base
			resetPart
			localPart
		}{b, x, lp}
	case !reserves && !holds && resets && !local:
		return struct {
			base
			resetPart
		}{b, x}
	case !reserves && !holds && !resets && local:
		return struct {
			base
			localPart
		}{b, lp}
	case !reserves && !holds && !resets && !local:
		return b
	}
	return b
}

// base is a guard as a [ratelimit.Wrapper] and nothing more.
type base struct{ g full }

// Allow passes the call to the guard.
func (p base) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return p.g.Allow(ctx, req)
}

// Unwrap returns the guard's backend.
func (p base) Unwrap() ratelimit.Limiter { return p.g.Unwrap() }

// guard returns the guard, for Of.
func (p base) guard() ratelimit.Limiter { return p.g }

// reservePart is a guard's [ratelimit.Reserver].
type reservePart struct{ g full }

// Reserve passes the call to the guard.
func (p reservePart) Reserve(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, time.Time, error) {
	return p.g.Reserve(ctx, req)
}

// Adjust passes the call to the guard.
func (p reservePart) Adjust(ctx context.Context, req ratelimit.Request, at time.Time, delta int64) error {
	return p.g.Adjust(ctx, req, at, delta)
}

// slotPart is a guard's [ratelimit.SlotHolder].
type slotPart struct{ g full }

// ReserveSlot passes the call to the guard.
func (p slotPart) ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error) {
	return p.g.ReserveSlot(ctx, req, slot, token)
}

// ReleaseSlot passes the call to the guard.
func (p slotPart) ReleaseSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) error {
	return p.g.ReleaseSlot(ctx, req, slot, token)
}

// RenewSlot passes the call to the guard.
func (p slotPart) RenewSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (bool, error) {
	return p.g.RenewSlot(ctx, req, slot, token)
}

// PeekSlot passes the call to the guard.
func (p slotPart) PeekSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit) (ratelimit.Decision, int64, error) {
	return p.g.PeekSlot(ctx, req, slot)
}

// resetPart is a guard's [ratelimit.Resetter].
type resetPart struct{ g full }

// Reset passes the call to the guard.
func (p resetPart) Reset(ctx context.Context, name, key string) error {
	return p.g.Reset(ctx, name, key)
}

// localPart is the fallback guard's [ratelimit.Fallback] and [Recoverer].
type localPart struct{ f *Fallback }

// AllowLocal passes the call to the fallback guard.
func (p localPart) AllowLocal(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, []ratelimit.Limit, error) {
	return p.f.AllowLocal(ctx, req)
}

// Recover passes the call to the fallback guard.
func (p localPart) Recover(ctx context.Context, wait time.Duration) { p.f.Recover(ctx, wait) }

// Recovering passes the call to the fallback guard.
func (p localPart) Recovering() bool { return p.f.Recovering() }
