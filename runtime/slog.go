package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// SlogHook is a [Hook] (and a [ShadowHook]) that logs to a [slog.Logger]:
// admissions at Debug, denials at Warn, would-be denials of shadow rules
// at Info and failures at Error. Make one with [NewSlogHook].
//
// Each record carries the limit's name, key, cost and the limit it
// describes; decisions add remaining, retry_after and reset_after (and
// source when the backend did not make them: "fallback" for [FailLocal]),
// and failures the error. Records below the logger's level cost one Enabled
// call.
//
// While a circuit breaker is open every call fails at once; those
// failures ([ErrCircuitOpen]) are logged at most once a second, with the
// number left out since the last one as "suppressed", so an outage does
// not flood the log.
type SlogHook struct {
	logger *slog.Logger

	lastOpen   atomic.Int64 // Unix ns of the last ErrCircuitOpen record
	suppressed atomic.Int64 // ErrCircuitOpen failures not logged since
}

// circuitOpenLogInterval spaces the records of failures refused by an open
// circuit breaker.
const circuitOpenLogInterval = time.Second

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

// Failed logs a backend failure at Error. See [Hook].
func (h *SlogHook) Failed(ctx context.Context, req *Request, err error) {
	if !h.logger.Enabled(ctx, slog.LevelError) {
		return
	}
	var suppressed int64
	if errors.Is(err, ErrCircuitOpen) {
		now := time.Now().UnixNano()
		last := h.lastOpen.Load()
		if now-last < int64(circuitOpenLogInterval) || !h.lastOpen.CompareAndSwap(last, now) {
			h.suppressed.Add(1)
			return
		}
		suppressed = h.suppressed.Swap(0)
	}
	attrs := h.request(req, -1)
	attrs = append(attrs, slog.Any("error", err))
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64("suppressed", suppressed))
	}
	h.logger.LogAttrs(ctx, slog.LevelError, "ratelimit: backend failure", attrs...)
}

func (h *SlogHook) decision(ctx context.Context, level slog.Level, msg string, req *Request, d Decision) {
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := h.request(req, d.Limit)
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
	attrs = append(attrs, slog.Int64("cost", req.cost()))
	if i >= 0 && i < len(req.Limits) {
		attrs = append(attrs, slog.String("limit", req.Limits[i].String()))
	}
	return attrs
}
