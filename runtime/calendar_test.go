package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCalendarLimit(t *testing.T) {
	l := Limit{Calendar: "month", TZ: "Europe/Paris", Threshold: 10000}
	assert.Equal(t, "10000/month Europe/Paris (fixed_window)", l.String())
	assert.Equal(t, "3/day (fixed_window)", Limit{Calendar: "day", Threshold: 3}.String())
	require.NoError(t, l.Validate())
	for _, tt := range []struct {
		l   Limit
		msg string
	}{
		{Limit{Calendar: "month", TZ: "Europe/Pariss", Threshold: 1}, `unknown time zone "Europe/Pariss" (want an IANA name such as Europe/Paris or UTC)`},
		{Limit{Calendar: "month", Threshold: 1, Algorithm: SlidingLog}, "calendar period month is for fixed_window, not sliding_log"},
		{Limit{Calendar: "month", Period: time.Hour, Threshold: 1}, "period 1h0m0s and calendar period month: a limit has one period"},
		{Limit{Period: time.Hour, TZ: "UTC", Threshold: 1}, "tz is for a calendar period (day, week, month, year), not a period of 1h0m0s"},
	} {
		err := tt.l.Validate()
		assert.ErrorIs(t, err, ErrInvalidLimit)
		assert.ErrorContains(t, err, tt.msg)
	}
}

func TestParseOverrideCalendar(t *testing.T) {
	got, err := parseOverride("period=month tz=Europe/Paris threshold=10000")
	require.NoError(t, err)
	assert.Equal(t, []Limit{{Calendar: "month", TZ: "Europe/Paris", Threshold: 10000}}, got)
	got, err = parseOverride(`{"period": "week", "tz": "America/New_York", "threshold": 7, "algorithm": "fixed_window"}`)
	require.NoError(t, err)
	assert.Equal(t, []Limit{{Calendar: "week", TZ: "America/New_York", Threshold: 7, Algorithm: FixedWindow}}, got)
	_, err = parseOverride("period=day tz=Nowhere/Town threshold=1")
	assert.ErrorIs(t, err, ErrInvalidLimit)
	assert.EqualError(t, err, `limit 1: ratelimit: invalid limit: unknown time zone "Nowhere/Town" (want an IANA name such as Europe/Paris or UTC)`)
	_, err = parseOverride("period=month threshold=1 algorithm=gcra")
	assert.ErrorContains(t, err, "calendar period month is for fixed_window, not gcra")
}

// TestMemoryMonthlyQuotaResets: a monthly quota in Paris resets at
// midnight of the 1st there, not a µs earlier, and tells when.
func TestMemoryMonthlyQuotaResets(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	clock := newManualClock()
	lim := NewMemory(WithClock(clock))
	req := Request{Name: "quota", Key: "k", Limits: []Limit{{Calendar: "month", TZ: "Europe/Paris", Threshold: 3}}}
	for _, boundary := range []time.Time{
		time.Date(2028, 2, 1, 0, 0, 0, 0, paris), // Jan 31 → Feb 1
		time.Date(2028, 3, 1, 0, 0, 0, 0, paris), // after Feb 29
		time.Date(2029, 1, 1, 0, 0, 0, 0, paris), // Dec 31 → Jan 1
	} {
		req.Key = boundary.String()
		clock.Set(boundary.Add(-time.Hour))
		for range 3 {
			require.True(t, allow(t, lim, req).Allowed)
		}
		clock.Set(boundary.Add(-time.Microsecond))
		d := allow(t, lim, req)
		require.False(t, d.Allowed)
		assert.Equal(t, time.Microsecond, d.RetryAfter, "%s", boundary)
		assert.Equal(t, time.Microsecond, d.ResetAfter)
		clock.Set(boundary)
		d = allow(t, lim, req)
		require.True(t, d.Allowed, "%s", boundary)
		assert.Equal(t, int64(2), d.Remaining)
		assert.Equal(t, boundary.AddDate(0, 1, 0).Sub(boundary), d.ResetAfter)
	}
}

// TestMemoryDSTDay: a daily quota in New York lasts 23 hours on the day
// DST starts, 25 on the day it ends.
func TestMemoryDSTDay(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	clock := newManualClock()
	lim := NewMemory(WithClock(clock))
	req := Request{Name: "daily", Limits: []Limit{{Calendar: "day", TZ: "America/New_York", Threshold: 1}}}
	for _, tt := range []struct {
		day  time.Time
		want time.Duration
	}{
		{time.Date(2027, 3, 14, 0, 0, 0, 0, ny), 23 * time.Hour},
		{time.Date(2027, 11, 7, 0, 0, 0, 0, ny), 25 * time.Hour},
	} {
		clock.Set(tt.day)
		d := allow(t, lim, req)
		require.True(t, d.Allowed)
		assert.Equal(t, tt.want, d.ResetAfter)
		clock.Advance(tt.want - time.Microsecond)
		require.False(t, allow(t, lim, req).Allowed)
		clock.Advance(time.Microsecond)
		require.True(t, allow(t, lim, req).Allowed)
	}
}

// TestCalendarLimitError names the calendar period.
func TestCalendarLimitError(t *testing.T) {
	clock := newManualClock()
	lim := NewMemory(WithClock(clock))
	r := &Rule{Name: "svc.Get", Limits: []Limit{{Calendar: "week", TZ: "Asia/Tokyo", Threshold: 1, Algorithm: FixedWindow}}}
	require.NoError(t, r.Check(context.Background(), lim, 1, ""))
	err := r.Check(context.Background(), lim, 1, "")
	var le *LimitError
	require.True(t, errors.As(err, &le))
	assert.Contains(t, le.Error(), "exceeded 1 per week Asia/Tokyo; retry after")
}

// TestBlockedCalendarRule: a key blocked by an override is told to retry
// when the calendar window of the rule's first limit ends.
func TestBlockedCalendarRule(t *testing.T) {
	clock := newManualClock()
	var ov StaticOverrides
	ov.SetKey("svc.Get", "mallory", Limit{Algorithm: Block})
	lim := NewMemory(WithClock(clock), WithOverrides(&ov))
	r := &Rule{Name: "svc.Get", Limits: []Limit{{Calendar: "day", TZ: "Europe/Paris", Threshold: 5, Algorithm: FixedWindow}}}
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	clock.Set(time.Date(2028, 3, 25, 23, 0, 0, 0, paris))
	var le *LimitError
	require.ErrorAs(t, r.Check(context.Background(), lim, 1, "mallory"), &le)
	assert.Equal(t, time.Hour, le.RetryAfter)
	d, err := r.Peek(context.Background(), lim, "mallory")
	require.NoError(t, err)
	assert.Equal(t, time.Hour, d.RetryAfter)
}

// TestSettleCalendarLimit: a reservation on a monthly quota settles
// without a panic; a refund goes back to the month charged, only while it
// lasts, and a debt is charged to the month holding the settle.
func TestSettleCalendarLimit(t *testing.T) {
	ctx := context.Background()
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	m, clock, r := reserveOn(Limit{Calendar: "month", TZ: "Europe/Paris", Threshold: 10})
	first := time.Date(2028, 3, 1, 0, 0, 0, 0, paris)
	clock.Set(first.Add(-time.Hour))
	res, err := r.Reserve(ctx, m, 10, "k")
	require.NoError(t, err)
	clock.Advance(time.Minute)
	require.NotPanics(t, func() { require.NoError(t, res.Settle(ctx, 4)) })
	require.NoError(t, r.Check(ctx, m, 6, "k"), "six back in February")
	require.Error(t, r.Check(ctx, m, 1, "k"))

	// Reserved in February, settled in March: a refund gives nothing back
	// (February's count is gone), a debt counts in March.
	res, err = r.Reserve(ctx, m, 8, "k2")
	require.NoError(t, err)
	clock.Set(first.Add(time.Second))
	require.NoError(t, res.Settle(ctx, 2))
	require.NoError(t, r.Check(ctx, m, 10, "k2"), "March is whole")
	clock.Set(first.Add(-time.Second))
	res, err = r.Reserve(ctx, m, 8, "k3")
	require.NoError(t, err)
	clock.Set(first)
	require.NoError(t, res.Settle(ctx, 12)) // 4 more, in March
	var le *LimitError
	require.ErrorAs(t, r.Check(ctx, m, 7, "k3"), &le)
	assert.Equal(t, int64(6), le.Remaining, "March holds the debt alone")
	assert.Equal(t, first.AddDate(0, 1, 0).Sub(first), le.RetryAfter, "until April")
}
