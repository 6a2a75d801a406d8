package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// SlogHook is a [Hook] (and a [ShadowHook] and a [BreakerHook]) that logs
// to a [slog.Logger]: admissions at Debug, denials at Warn, would-be
// denials of shadow rules at Info and failures at Error. Make one with
// [NewSlogHook].
//
// Each record carries the limit's name, key, cost and the limit it
// describes; decisions add remaining, retry_after and reset_after (and
// source when the backend did not make them: "fallback" for [FailLocal]),
// and failures the error. Records below the logger's level cost one Enabled
// call.
//
// An outage is logged once per change of a circuit breaker's state, not
// once per call: the opening of a breaker at Warn ("ratelimit: circuit
// open", with the node and the error that opened it) and its closing at
// Info ("ratelimit: circuit closed", with how long it was open). The calls
// an open breaker refuses ([ErrCircuitOpen]) are logged at Debug only; the
// failed calls that opened it (as many as [WithBreaker]'s failures, plus
// the calls in flight then) at Error. A [Metrics] hook still counts every
// failure.
type SlogHook struct {
	logger *slog.Logger
}

// NewSlogHook returns a hook that logs to logger (slog.Default() if nil).
func NewSlogHook(logger *slog.Logger) *SlogHook {
	if logger == nil {
		logger = slog.Default()
	}
	return &SlogHook{logger: logger}
}

// Decided logs an admission at Debug and a denial at Warn. See [Hook].
func (h *SlogHook) Decided(ctx context.Context, req *Request, d Decision) {
	if d.Allowed {
		h.decision(ctx, slog.LevelDebug, "ratelimit: admitted", req, d)
	} else {
		h.decision(ctx, slog.LevelWarn, "ratelimit: limited", req, d)
	}
}

// ShadowLimited logs a would-be denial at Info. See [ShadowHook].
func (h *SlogHook) ShadowLimited(ctx context.Context, req *Request, d Decision) {
	h.decision(ctx, slog.LevelInfo, "ratelimit: shadow limited", req, d)
}

// Failed logs a backend failure at Error, or at Debug when an open
// circuit breaker refused the call. See [Hook].
func (h *SlogHook) Failed(ctx context.Context, req *Request, err error) {
	level := slog.LevelError
	if errors.Is(err, ErrCircuitOpen) {
		level = slog.LevelDebug
	}
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := h.request(req, -1)
	attrs = append(attrs, slog.Any("error", err))
	h.logger.LogAttrs(ctx, level, "ratelimit: backend failure", attrs...)
}

// BreakerOpened logs at Warn that the breaker of node opened. See
// [BreakerHook].
func (h *SlogHook) BreakerOpened(node string, err error) {
	h.logger.LogAttrs(context.Background(), slog.LevelWarn, "ratelimit: circuit open",
		slog.String("node", node), slog.Any("error", err))
}

// BreakerClosed logs at Info that Redis at node decides again. See
// [BreakerHook].
func (h *SlogHook) BreakerClosed(node string, open time.Duration) {
	h.logger.LogAttrs(context.Background(), slog.LevelInfo, "ratelimit: circuit closed",
		slog.String("node", node), slog.Duration("open_for", open))
}

func (h *SlogHook) decision(ctx context.Context, level slog.Level, msg string, req *Request, d Decision) {
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := h.request(req, d.LimitIndex)
	attrs = append(attrs, slog.Int64("remaining", d.Remaining))
	if !d.Allowed {
		attrs = append(attrs, slog.Duration("retry_after", d.RetryAfter))
	}
	attrs = append(attrs, slog.Duration("reset_after", d.ResetAfter))
	if d.Delay > 0 {
		attrs = append(attrs, slog.Duration("delay", d.Delay))
	}
	if d.Source != SourceBackend {
		attrs = append(attrs, slog.String("source", d.Source.String()))
	}
	h.logger.LogAttrs(ctx, level, msg, attrs...)
}

// request returns the attributes of req and of its limit i.
func (h *SlogHook) request(req *Request, i int) []slog.Attr {
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String("name", req.Name))
	if req.Key != "" {
		attrs = append(attrs, slog.String("key", req.Key))
	}
	attrs = append(attrs, slog.Int64("cost", req.Units()))
	if i >= 0 && i < len(req.Limits) {
		attrs = append(attrs, slog.String("limit", req.Limits[i].String()))
	}
	return attrs
}
