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
