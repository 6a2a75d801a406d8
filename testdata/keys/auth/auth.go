// Package auth is a helper of the keys golden test: it keeps the caller's
// principal in the context, as an authentication middleware does.
package auth

import (
	"context"
	"errors"
)

type principalKey struct{}

// ErrNoPrincipal is returned for a context without a principal.
var ErrNoPrincipal = errors.New("auth: no principal")

// With returns ctx carrying the principal p.
func With(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Principal returns the principal of ctx.
func Principal(ctx context.Context) (string, error) {
	p, ok := ctx.Value(principalKey{}).(string)
	if !ok {
		return "", ErrNoPrincipal
	}
	return p, nil
}
