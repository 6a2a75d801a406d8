package ratelimit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// backendOption is what a backend outside this module declares to take
// the core's options and its own in one list, as the Option doc says.
type backendOption = interface{ Configure(*ratelimit.Config) }

// tableOption is an option of that backend: it sets what the backend
// reads, and nothing in a Config.
type tableOption string

func (tableOption) Configure(*ratelimit.Config) {}

// TestNewConfigTakesABackendsOptions: NewConfig takes a backend's option
// list, applying the core's options in it and leaving the backend's own
// to the backend.
func TestNewConfigTakesABackendsOptions(t *testing.T) {
	opts := []backendOption{tableOption("limits"), ratelimit.WithErrorPolicy(ratelimit.FailClosed), nil, ratelimit.Option{}, ratelimit.WithMaxKeys(7)}
	c := ratelimit.NewConfig(opts...)
	assert.Equal(t, ratelimit.FailClosed, c.ErrorPolicy)
	assert.Equal(t, 7, c.MaxKeys)

	var table tableOption
	for _, o := range opts {
		if o, ok := o.(tableOption); ok {
			table = o
		}
	}
	assert.Equal(t, tableOption("limits"), table)
	assert.Equal(t, ratelimit.NewConfig[ratelimit.Option]().MaxKeys, ratelimit.DefaultMaxKeys)
}

// TestZeroOptionChangesNothing: the zero Option, the only one another
// package can make, configures nothing.
func TestZeroOptionChangesNothing(t *testing.T) {
	assert.Equal(t, ratelimit.NewConfig[ratelimit.Option](), ratelimit.NewConfig(ratelimit.Option{}))
	assert.Equal(t, ratelimit.DefaultMaxKeys, ratelimit.NewMemory(ratelimit.Option{}).Abilities().Config.MaxKeys)
}
