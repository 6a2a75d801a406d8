package redislimit

import (
	"context"
	"errors"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// allowKeys decides a request with a key per limit (see [ratelimit.Request]'s Keys).
func (l *Limiter) allowKeys(ctx context.Context, req *ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.ErrUnsupported // TODO: next commit
}
