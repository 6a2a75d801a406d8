package limitfacts

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLookup(t *testing.T) {
	a, ok := Lookup(TokenBucket)
	require.True(t, ok)
	assert.Equal(t, Algorithm{ID: 4, Name: TokenBucket, Const: "TokenBucket", KeyTag: "tb", State: Bucket, MaxThreshold: MaxValue, Burst: true}, a)
	_, ok = Lookup("")
	assert.False(t, ok, "the empty name means Default, but is no algorithm's name")
	_, ok = Lookup("Token_Bucket")
	assert.False(t, ok)
	for _, a := range Algorithms() {
		got, ok := Lookup(a.Name)
		assert.True(t, ok, a.Name)
		assert.Equal(t, a, got)
	}
}

func TestNames(t *testing.T) {
	assert.Equal(t, []string{SlidingLog, FixedWindow, SlidingWindow, TokenBucket, LeakyBucket, GCRA}, Names(nil))
	assert.Equal(t, []string{TokenBucket, GCRA}, Names(takesBurst))
	assert.Equal(t, []string{LeakyBucket}, Names(takesCapacity))
	assert.Equal(t, []string{FixedWindow, SlidingWindow}, Names(func(a Algorithm) bool { return a.WholeMilliseconds }))
	assert.Equal(t, []string{FixedWindow}, Names(countsCalendar))
}

// TestEveryAlgorithmHasAFullRow checks what every row must give: its ID
// (its place in the rows), a constant, a key tag of its own (Redis keeps each algorithm's state
// apart), the shape of its state and a largest threshold.
func TestEveryAlgorithmHasAFullRow(t *testing.T) {
	tags := map[string]string{}
	for i, a := range Algorithms() {
		assert.Equal(t, uint8(i+1), a.ID, "%s: IDs count 1 up in the order of the rows", a.Name)
		assert.NotEmpty(t, a.Const, a.Name)
		assert.NotEmpty(t, a.KeyTag, a.Name)
		if other, ok := tags[a.KeyTag]; ok {
			t.Errorf("%s and %s share key tag %q", a.Name, other, a.KeyTag)
		}
		tags[a.KeyTag] = a.Name
		assert.Contains(t, []State{Log, Window, Windows, Bucket}, a.State, a.Name)
		assert.Positive(t, a.MaxThreshold, a.Name)
	}
	cal, _ := Lookup(CalendarAlgorithm)
	assert.True(t, cal.Calendar, "the default of a calendar period counts calendar periods")
}

func TestAlgorithmsReturnsACopy(t *testing.T) {
	Algorithms()[0].Name = "changed"
	assert.Equal(t, SlidingLog, Algorithms()[0].Name)
}

func TestBound(t *testing.T) {
	for _, tt := range []struct {
		l     Limit
		field string
		n     int64
	}{
		{Limit{Threshold: 5}, "threshold", 5},
		{Limit{Threshold: 5, Algorithm: GCRA, Burst: 20}, "burst", 20},
		{Limit{Threshold: 5, Algorithm: TokenBucket}, "threshold", 5},
		{Limit{Threshold: 5, Algorithm: LeakyBucket, Capacity: 9}, "capacity", 9},
		{Limit{Threshold: 5, Algorithm: SlidingLog, Burst: 20}, "threshold", 5}, // burst is not its
	} {
		field, n := tt.l.Bound()
		assert.Equal(t, tt.field, field, "%+v", tt.l)
		assert.Equal(t, tt.n, n, "%+v", tt.l)
	}
}

func TestCheck(t *testing.T) {
	maxPeriod := MaxValue * time.Microsecond
	for _, l := range []Limit{
		{Period: time.Microsecond, Threshold: 1},
		{Period: maxPeriod, Threshold: MaxValue},
		{Period: maxPeriod + 999, Threshold: 1}, // the period counts whole microseconds
		{Period: time.Second, Threshold: MaxSlidingWindowThreshold, Algorithm: SlidingWindow},
		{Period: time.Millisecond, Threshold: 1, Algorithm: FixedWindow},
		{Period: time.Second, Threshold: 1, Algorithm: GCRA, Burst: 1_000_000_000},
		{Period: time.Second, Threshold: 2, Algorithm: TokenBucket, Burst: 2 * MaxValue / 1_000_000},
		{Period: time.Second, Threshold: 1, Algorithm: LeakyBucket, Capacity: 9},
	} {
		assert.NoError(t, l.Check(), "%+v", l)
	}
	for _, tt := range []struct {
		l          Limit
		field, msg string
	}{
		{Limit{Period: 999, Threshold: 1}, "period", "period 999ns is shorter than 1µs"},
		{Limit{Period: maxPeriod + time.Microsecond, Threshold: 1}, "period", "period 312749h58m26.842624s is longer than 312749h58m26.842623s"},
		{Limit{Period: time.Second}, "threshold", "threshold 0 is not positive"},
		{Limit{Period: time.Second, Threshold: MaxValue + 1}, "threshold", "threshold 1125899906842624 is above 1125899906842623"},
		{Limit{Period: time.Second, Threshold: 1, Algorithm: "magic"}, "algorithm", `unknown algorithm "magic"`},
		{Limit{Period: 1500 * time.Microsecond, Threshold: 1, Algorithm: SlidingWindow}, "period", "period 1.5ms of sliding_window is not a whole number of milliseconds"},
		{Limit{Period: time.Second, Threshold: MaxSlidingWindowThreshold + 1, Algorithm: SlidingWindow}, "threshold", "threshold 67108864 of sliding_window is above 67108863"},
		{Limit{Period: time.Second, Threshold: 1, Algorithm: GCRA, Burst: -1}, "burst", "burst -1 is negative"},
		{Limit{Period: time.Second, Threshold: 1, Burst: 2}, "burst", "burst is for token_bucket and gcra, not sliding_log"},
		{Limit{Period: time.Second, Threshold: 1, Algorithm: LeakyBucket, Capacity: -1}, "capacity", "capacity -1 is negative"},
		{Limit{Period: time.Second, Threshold: 1, Algorithm: GCRA, Capacity: 2}, "capacity", "capacity is for leaky_bucket, not gcra"},
		{Limit{Period: time.Second, Threshold: 1, Algorithm: TokenBucket, Burst: MaxValue + 1}, "burst", "burst or capacity 1125899906842624 is above 1125899906842623"},
		{Limit{Period: time.Second, Threshold: 1, Algorithm: LeakyBucket, Capacity: MaxValue}, "capacity",
			"1125899906842623 units at 1 per 1s take longer than 312749h58m26.842623s to drain"},
		{Limit{Period: time.Second, Threshold: 2, Algorithm: TokenBucket, Burst: 2*MaxValue/1_000_000 + 1}, "burst",
			"2251799814 units at 2 per 1s take longer than 312749h58m26.842623s to drain"},
	} {
		var e *Error
		if assert.True(t, errors.As(tt.l.Check(), &e), "%+v", tt.l) {
			assert.Equal(t, tt.field, e.Field, "%+v", tt.l)
			assert.Equal(t, tt.msg, e.Error(), "%+v", tt.l)
		}
	}
}

// TestCheckOfAValidLimitDoesNotAllocate: the runtime checks overriding
// limits on every call, so a valid limit must cost no garbage.
func TestCheckOfAValidLimitDoesNotAllocate(t *testing.T) {
	l := Limit{Period: time.Second, Threshold: 10, Algorithm: TokenBucket, Burst: 20}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if l.Check() != nil {
			t.Fatal("invalid")
		}
		if _, n := l.Bound(); n != 20 {
			t.Fatal("bound")
		}
	}))
}

// TestSpanIsHowLongAChargeCounts: a log's and a window's charge counts a
// period, a sliding window's two, and a bucket's until its capacity
// drains, rounded up to the µs.
func TestSpanIsHowLongAChargeCounts(t *testing.T) {
	assert.EqualValues(t, 1_000_000, Log.Span(1_000_000, 3, 3))
	assert.EqualValues(t, 1_000_000, Window.Span(1_000_000, 3, 3))
	assert.EqualValues(t, 2_000_000, Windows.Span(1_000_000, 3, 3))
	assert.EqualValues(t, 666_667, Bucket.Span(1_000_000, 3, 2))
	assert.EqualValues(t, 1_000_000, State(0).Span(1_000_000, 3, 2))
}
