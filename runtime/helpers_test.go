package ratelimit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
)

const us = time.Microsecond

type manualClock = clocktest.Manual

func newManualClock() *manualClock { return clocktest.NewManual() }

func allow(t *testing.T, l Limiter, req Request) Decision {
	t.Helper()
	d, err := l.Allow(context.Background(), req)
	require.NoError(t, err)
	return d
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// decidesOnly gives a test limiter the rest of the contract: its Do
// carries out nothing, and its Abilities report nothing.
type decidesOnly struct{}

func (decidesOnly) Do(_ context.Context, op Op) (Result, error) {
	return Result{}, Unsupported(nil, op.Kind)
}

func (decidesOnly) Abilities() Abilities { return Abilities{} }

// allowsOnly is a limiter that decides with next's Allow, and carries out
// nothing else.
type allowsOnly struct {
	decidesOnly
	next Limiter
}

func (a allowsOnly) Allow(ctx context.Context, req Request) (Decision, error) {
	return a.next.Allow(ctx, req)
}
