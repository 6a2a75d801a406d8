package ratelimitotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	ratelimitotel "github.com/ratelimitgen/ratelimitgen/adapters/otel"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// sums returns the data points of the int64 counter m by the values of
// its attributes keys, joined by '/'.
func sums(t *testing.T, m metricdata.Metrics, keys ...attribute.Key) map[string]int64 {
	t.Helper()
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s: %T", m.Name, m.Data)
	out := map[string]int64{}
	for _, p := range sum.DataPoints {
		out[attrValues(p.Attributes, keys...)] = p.Value
	}
	return out
}

func attrValues(set attribute.Set, keys ...attribute.Key) string {
	s := ""
	for i, k := range keys {
		v, _ := set.Value(k)
		if i > 0 {
			s += "/"
		}
		s += v.Emit()
	}
	return s
}

// TestInstrumentMeasuresEveryPath: plain checks, settle= (Reserve, then
// Adjust), concurrency= (slots), Peek are timed, by call, and counted in
// calls and in units per rule and line, as a real SDK reads them, with no
// key among the attributes.
func TestInstrumentMeasuresEveryPath(t *testing.T) {
	ctx := context.Background()
	s := newSDK(t)
	l := s.tel.Instrument(ratelimit.NewMemory())
	plain := &ratelimit.Rule{Name: "plain", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, {Period: time.Hour, Threshold: 7}}}
	require.NoError(t, plain.Check(ctx, l, 3, secret))
	require.NoError(t, plain.Check(ctx, l, 3, secret))
	require.ErrorIs(t, plain.Check(ctx, l, 3, secret), ratelimit.ErrLimited)
	_, err := plain.Peek(ctx, l, secret)
	require.NoError(t, err)
	settle := &ratelimit.Rule{Name: "tokens", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1000}}}
	res, err := settle.Reserve(ctx, l, 500, secret)
	require.NoError(t, err)
	require.NoError(t, res.Settle(ctx, 120))
	conc := &ratelimit.Rule{Name: "exports", Limits: []ratelimit.Limit{{Algorithm: "concurrency", Threshold: 1, Period: time.Minute}}}
	held, err := conc.Reserve(ctx, l, 1, secret)
	require.NoError(t, err)
	require.NoError(t, held.Release(ctx))

	got := s.metrics(t)
	hist, ok := got["ratelimit.decision.duration"].Data.(metricdata.Histogram[float64])
	require.True(t, ok)
	timed := map[string]uint64{}
	for _, p := range hist.DataPoints {
		timed[attrValues(p.Attributes, ratelimitotel.AttrName, ratelimitotel.AttrCall, ratelimitotel.AttrSource)] = p.Count
	}
	assert.Equal(t, map[string]uint64{
		"plain/allow/backend": 3, "plain/peek/backend": 1,
		"tokens/reserve/backend": 1, "tokens/adjust/backend": 1,
		"exports/reserve_slot/backend": 1, "exports/release_slot/backend": 1,
	}, timed)
	assert.Equal(t, "{call}", got["ratelimit.calls"].Unit)
	assert.Equal(t, map[string]int64{
		"plain/allow/allowed": 2, "plain/allow/limited": 1, "plain/peek/allowed": 1,
		"tokens/reserve/allowed": 1, "tokens/adjust/refunded": 1,
		"exports/reserve_slot/allowed": 1, "exports/release_slot/released": 1,
	}, sums(t, got["ratelimit.calls"], ratelimitotel.AttrName, ratelimitotel.AttrCall, ratelimitotel.AttrOutcome))
	assert.Equal(t, "{unit}", got["ratelimit.units"].Unit)
	assert.Equal(t, map[string]int64{
		"plain/0/allowed": 6, "plain/1/allowed": 6, "plain/1/limited": 3,
		"tokens/0/allowed": 500, "tokens/0/refunded": 380,
		"exports/0/allowed": 1, "exports/0/released": 1,
	}, sums(t, got["ratelimit.units"], ratelimitotel.AttrName, ratelimitotel.AttrLine, ratelimitotel.AttrOutcome))

	for _, m := range got {
		assert.NotContains(t, metricText(m), secret, "no key in %s", m.Name)
	}
}

// metricText returns the attribute values of m's data points.
func metricText(m metricdata.Metrics) string {
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	s := ""
	for _, set := range sets {
		for _, kv := range set.ToSlice() {
			s += kv.Value.Emit() + " "
		}
	}
	return s
}
