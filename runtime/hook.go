package ratelimit

import (
	"context"
	"slices"
	"time"
)

// shadowKey marks the context of a call decided for a shadow rule, so that
// the limiter's hook can tell its denials from real ones.
type shadowKey struct{}

// withShadow returns ctx marked as the context of a shadow rule's call.
func withShadow(ctx context.Context) context.Context {
	return context.WithValue(ctx, shadowKey{}, true)
}

// isShadow reports whether ctx is the context of a shadow rule's call.
func isShadow(ctx context.Context) bool {
	v, _ := ctx.Value(shadowKey{}).(bool)
	return v
}

// routeShadow wraps the hook a limiter is given so that denials decided
// for shadow rules reach ShadowLimited when h implements [ShadowHook].
// The router is a [BreakerHook] only when h is one.
func routeShadow(h Hook) Hook {
	switch h.(type) {
	case *shadowRouter, *breakerRouter:
		return h
	}
	r := &shadowRouter{Hook: h}
	r.shadow, _ = h.(ShadowHook)
	if bh, ok := h.(BreakerHook); ok {
		return &breakerRouter{shadowRouter: r, breaker: bh}
	}
	return r
}

// breakerRouter is a shadowRouter of a hook that is a [BreakerHook].
type breakerRouter struct {
	*shadowRouter
	breaker BreakerHook
}

// BreakerOpened tells the hook.
func (r *breakerRouter) BreakerOpened(node string, err error) { r.breaker.BreakerOpened(node, err) }

// BreakerClosed tells the hook.
func (r *breakerRouter) BreakerClosed(node string, open time.Duration) {
	r.breaker.BreakerClosed(node, open)
}

type shadowRouter struct {
	Hook
	shadow ShadowHook // nil when Hook is not a ShadowHook
}

// Decided passes d on, to ShadowLimited if it is a shadow rule's denial.
func (r *shadowRouter) Decided(ctx context.Context, req *Request, d Decision) {
	if !d.Allowed && isShadow(ctx) {
		r.ShadowLimited(ctx, req, d)
		return
	}
	r.Hook.Decided(ctx, req, d)
}

// InFlight passes a change of the calls in flight on to the hook, if it
// counts them (see InFlightHook).
func (r *shadowRouter) InFlight(ctx context.Context, name string, delta int) {
	if s, ok := r.Hook.(InFlightHook); ok {
		s.InFlight(ctx, name, delta)
	}
}

// ShadowLimited passes d on to the hook's ShadowLimited, or to its Decided
// when it has none.
func (r *shadowRouter) ShadowLimited(ctx context.Context, req *Request, d Decision) {
	if r.shadow != nil {
		r.shadow.ShadowLimited(ctx, req, d)
		return
	}
	r.Hook.Decided(ctx, req, d)
}

// joinHooks returns a hook that reports to each of hooks in turn, skipping
// nil ones (see [WithHook]): the one hook itself, or nil for none.
func joinHooks(hooks ...Hook) Hook {
	var m multiHook
	breakers := false
	for _, h := range hooks {
		if h != nil {
			m = append(m, h)
			_, bh := h.(BreakerHook)
			breakers = breakers || bh
		}
	}
	switch {
	case len(m) == 0:
		return nil
	case len(m) == 1:
		return m[0]
	case breakers:
		return breakerHooks{m}
	}
	return m
}

// breakerHooks is a multiHook of which at least one hook is a
// [BreakerHook].
type breakerHooks struct{ multiHook }

type multiHook []Hook

// Decided reports d to each hook.
func (m multiHook) Decided(ctx context.Context, req *Request, d Decision) {
	for _, h := range m {
		h.Decided(ctx, req, d)
	}
}

// InFlight reports a change of the calls in flight to each hook that
// counts them (see InFlightHook).
func (m multiHook) InFlight(ctx context.Context, name string, delta int) {
	for _, h := range m {
		if s, ok := h.(InFlightHook); ok {
			s.InFlight(ctx, name, delta)
		}
	}
}

// Failed reports err to each hook.
func (m multiHook) Failed(ctx context.Context, req *Request, err error) {
	for _, h := range m {
		h.Failed(ctx, req, err)
	}
}

// ShadowLimited reports d to each hook's ShadowLimited, or to its Decided
// when it has none.
func (m multiHook) ShadowLimited(ctx context.Context, req *Request, d Decision) {
	for _, h := range m {
		if s, ok := h.(ShadowHook); ok {
			s.ShadowLimited(ctx, req, d)
		} else {
			h.Decided(ctx, req, d)
		}
	}
}

// BreakerOpened tells each hook that is a [BreakerHook].
func (m breakerHooks) BreakerOpened(node string, err error) {
	for _, h := range m.multiHook {
		if bh, ok := h.(BreakerHook); ok {
			bh.BreakerOpened(node, err)
		}
	}
}

// BreakerClosed tells each hook that is a [BreakerHook].
func (m breakerHooks) BreakerClosed(node string, open time.Duration) {
	for _, h := range m.multiHook {
		if bh, ok := h.(BreakerHook); ok {
			bh.BreakerClosed(node, open)
		}
	}
}

// LogsBreakers reports that h logs the openings and closings of circuit
// breakers (unless h is nil). A breaker whose limiter's hook has no such
// method saying so, itself or beside others in [WithHook] (a metrics hook alone,
// say), also logs them to slog.Default(), so that an outage is never
// silent (see guard.WithBreaker).
func (h *SlogHook) LogsBreakers() bool { return h != nil }

// logsBreakers reports whether hook says it logs breakers (see
// [SlogHook.LogsBreakers]).
func logsBreakers(hook Hook) bool {
	lb, ok := hook.(interface{ LogsBreakers() bool })
	return ok && lb.LogsBreakers()
}

// LogsBreakers reports whether the hook r routes to logs breakers.
func (r *shadowRouter) LogsBreakers() bool { return logsBreakers(r.Hook) }

// LogsBreakers reports whether the hook r routes to logs breakers.
func (r *breakerRouter) LogsBreakers() bool { return logsBreakers(r.Hook) }

// LogsBreakers reports whether a hook of m logs breakers.
func (m multiHook) LogsBreakers() bool { return slices.ContainsFunc(m, logsBreakers) }

// LogsBreakers reports whether a hook of b logs breakers.
func (b breakerHooks) LogsBreakers() bool { return slices.ContainsFunc(b.multiHook, logsBreakers) }
