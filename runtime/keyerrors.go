package ratelimit

import (
	"errors"
	"fmt"
)

// ErrEmptyKey is wrapped by the error a decorator returns, under
// emptykey=deny, when a call's key is "".
var ErrEmptyKey = errors.New("ratelimit: key is empty")

// EmptyKeyError returns the error a decorator of the limit named name
// returns, under emptykey=deny, when its key expression (such as
// "principal(ctx)") gives "". It wraps [ErrEmptyKey]; the call is not
// charged.
func EmptyKeyError(name, expr string) error {
	return fmt.Errorf("%w: %s: %s is empty", ErrEmptyKey, name, expr)
}

// CallError returns the error a decorator of the limit named name returns
// when the function its key= or cost= calls (expr, such as
// "principal(ctx)") fails with err. It wraps err; the call is not charged,
// whatever the error policy.
func CallError(name, expr string, err error) error {
	return fmt.Errorf("ratelimit: %s: %s: %w", name, expr, err)
}
