package ratelimit

import (
	"errors"
	"fmt"
)

// KeyError reports a call a decorator did not check because it has no
// key: its key expression gave "" under emptykey=deny (Err is
// [ErrEmptyKey]), or the value its key is read through is a nil pointer
// (Err is [ErrNilKey]). The call is not charged. Generated code makes it
// as &ratelimit.KeyError{Name: rule.Name, Expr: "principal(ctx)", Err:
// ratelimit.ErrEmptyKey}; errors.Is(err, Err) holds for it.
type KeyError struct {
	// Name is the limit identity of the call.
	Name string
	// Expr is the key expression, such as "principal(ctx)", or the path
	// of the nil pointer, such as "req.Tenant".
	Expr string
	// Err is ErrEmptyKey or ErrNilKey.
	Err error
}

// Error describes the missing key, naming the expression.
func (e *KeyError) Error() string {
	what := "empty"
	if errors.Is(e.Err, ErrNilKey) {
		what = "nil"
	}
	return fmt.Sprintf("%v: %s: %s is %s", e.Err, e.Name, e.Expr, what)
}

// Unwrap returns ErrEmptyKey or ErrNilKey.
func (e *KeyError) Unwrap() error { return e.Err }

// FuncError reports that the function a decorator's key= or cost= calls
// failed. It unwraps to the function's error, so errors.Is and errors.As
// see what the function returned. The call is not charged, whatever the
// error policy.
type FuncError struct {
	// Name is the limit identity of the call.
	Name string
	// Expr is the call that failed, such as "auth.Principal(ctx)".
	Expr string
	// Err is the function's error.
	Err error
}

// Error names the limit and the call, then the function's error.
func (e *FuncError) Error() string {
	return fmt.Sprintf("ratelimit: %s: %s: %v", e.Name, e.Expr, e.Err)
}

// Unwrap returns the function's error.
func (e *FuncError) Unwrap() error { return e.Err }
