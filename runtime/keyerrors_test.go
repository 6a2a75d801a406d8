package ratelimit_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestKeyErrors: the errors of a call without a key or whose key or cost
// function failed keep their text and their errors.Is answers, and
// errors.As finds their fields (for adapters that describe them without
// the Go expression).
func TestKeyErrors(t *testing.T) {
	empty := error(&ratelimit.KeyError{Name: "inventory.get", Expr: "principal(ctx)", Err: ratelimit.ErrEmptyKey})
	assert.EqualError(t, empty, "ratelimit: key is empty: inventory.get: principal(ctx) is empty")
	assert.ErrorIs(t, empty, ratelimit.ErrEmptyKey)
	assert.NotErrorIs(t, empty, ratelimit.ErrNilKey)
	var ke *ratelimit.KeyError
	require.ErrorAs(t, empty, &ke)
	assert.Equal(t, ratelimit.KeyError{Name: "inventory.get", Expr: "principal(ctx)", Err: ratelimit.ErrEmptyKey}, *ke)

	nilKey := error(&ratelimit.KeyError{Name: "inventory.watch", Expr: "req.Tenant", Err: ratelimit.ErrNilKey})
	assert.EqualError(t, nilKey, "ratelimit: key is nil: inventory.watch: req.Tenant is nil")
	assert.ErrorIs(t, nilKey, ratelimit.ErrNilKey)
	assert.NotErrorIs(t, nilKey, ratelimit.ErrEmptyKey)
	require.ErrorAs(t, nilKey, &ke)
	assert.Equal(t, "req.Tenant", ke.Expr)

	cause := errors.New("no principal")
	call := error(&ratelimit.FuncError{Name: "inventory.get", Expr: "auth.Principal(ctx)", Err: cause})
	assert.EqualError(t, call, "ratelimit: inventory.get: auth.Principal(ctx): no principal")
	assert.ErrorIs(t, call, cause)
	var fe *ratelimit.FuncError
	require.ErrorAs(t, call, &fe)
	assert.Equal(t, ratelimit.FuncError{Name: "inventory.get", Expr: "auth.Principal(ctx)", Err: cause}, *fe)
}
