// Package opaque is a user's own wrapper as the tests need one: a limiter
// that implements the contract faithfully and nothing more.
package opaque

import (
	"context"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Limiter passes every call on to Next and reports Next's abilities; it
// has no Unwrap method, so nothing can reach Next but through it.
type Limiter struct{ Next ratelimit.Limiter }

// Allow passes req on to Next.
func (o Limiter) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return o.Next.Allow(ctx, req)
}

// Do passes op on to Next.
func (o Limiter) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return o.Next.Do(ctx, op)
}

// Abilities reports Next's.
func (o Limiter) Abilities() ratelimit.Abilities { return o.Next.Abilities() }
