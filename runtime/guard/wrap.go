package guard

import (
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Wrap returns backend behind the guards of this package, as the options
// of this package among opts configure them, outermost first: the lease
// guard ([Leases], which leases only limits with a Prefetch, and answers
// Peek as its Allow would decide), the deny cache ([DenyCache], unless
// WithDenyCache(0)), the circuit breaker ([Breaker], around a [Probed]
// backend, unless WithBreaker(0, 0, 0)) and the local fallback
// ([Fallback], which carries back around a [Carrier] backend and counts
// the processes around a [Heartbeater] one), each as backend offers it in
// [ratelimit.Abilities.ForGuards] (which a wrapper of backend reports
// on). Each guard is a [ratelimit.Limiter] that passes on the operations
// it does not guard, and reports the abilities of backend, plus the
// fallback's ([ratelimit.OpFallback]). Pass it the options backend was
// made with, so that the guards read the same settings, and [Close] the
// limiter it returns when done with it.
func Wrap(backend ratelimit.Limiter, opts ...Option) ratelimit.Limiter {
	fb := newFallback(backend, opts...)
	var l ratelimit.Limiter = fb
	if b := newBreakerGuard(fb, opts...); b != nil {
		fb.Guarded(b)
		l = b
	}
	if c := newDenyGuard(l, opts...); c != nil {
		l = c
	}
	return NewLeases(l)
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

// Of returns the guard of type G in limiter's chain of guards (such as
// the *DenyCache of a limiter [Wrap] made, or of redislimit.Limiter),
// following Unwrap methods, and whether there is one. It finds guards
// only: what a guard needs of its backend is what the backend reports
// ([ratelimit.Abilities.ForGuards]), never found by unwrapping.
func Of[G ratelimit.Limiter](limiter ratelimit.Limiter) (G, bool) {
	for limiter != nil {
		if g, ok := limiter.(G); ok {
			return g, true
		}
		w, ok := limiter.(interface{ Unwrap() ratelimit.Limiter })
		if !ok {
			break
		}
		limiter = w.Unwrap()
	}
	var none G
	return none, false
}

// offered returns what backend offers the guards as a T (one of
// [Probed], [Carrier] and [Heartbeater]): the ForGuards value of its
// [ratelimit.Abilities], when it is a T.
func offered[T any](backend ratelimit.Limiter) (T, bool) {
	t, ok := backend.Abilities().ForGuards.(T)
	return t, ok
}
