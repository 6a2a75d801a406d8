package limitfacts

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	require.NoError(t, err)
	return loc
}

func TestWindowDST(t *testing.T) {
	paris := mustZone(t, "Europe/Paris")
	ny := mustZone(t, "America/New_York")
	for _, tt := range []struct {
		cal        Calendar
		at         time.Time
		start, end time.Time
	}{
		// Paris springs forward on the last Sunday of March: a 23-hour day.
		{Calendar{Day, paris}, time.Date(2026, 3, 29, 12, 0, 0, 0, paris), time.Date(2026, 3, 29, 0, 0, 0, 0, paris), time.Date(2026, 3, 30, 0, 0, 0, 0, paris)},
		// and falls back on the last Sunday of October: 25 hours.
		{Calendar{Day, paris}, time.Date(2026, 10, 25, 2, 30, 0, 0, paris), time.Date(2026, 10, 25, 0, 0, 0, 0, paris), time.Date(2026, 10, 26, 0, 0, 0, 0, paris)},
		{Calendar{Day, ny}, time.Date(2026, 3, 8, 1, 59, 59, 0, ny), time.Date(2026, 3, 8, 0, 0, 0, 0, ny), time.Date(2026, 3, 9, 0, 0, 0, 0, ny)},
		{Calendar{Month, paris}, time.Date(2026, 3, 31, 23, 59, 59, 999999000, paris), time.Date(2026, 3, 1, 0, 0, 0, 0, paris), time.Date(2026, 4, 1, 0, 0, 0, 0, paris)},
		// Leap year 2028: February has 29 days.
		{Calendar{Month, time.UTC}, time.Date(2028, 2, 29, 23, 0, 0, 0, time.UTC), time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)},
		{Calendar{Day, time.UTC}, time.Date(2028, 2, 28, 23, 0, 0, 0, time.UTC), time.Date(2028, 2, 28, 0, 0, 0, 0, time.UTC), time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{Calendar{Year, ny}, time.Date(2026, 12, 31, 23, 59, 59, 0, ny), time.Date(2026, 1, 1, 0, 0, 0, 0, ny), time.Date(2027, 1, 1, 0, 0, 0, 0, ny)},
		// ISO weeks start on Monday; 2026-01-01 is a Thursday.
		{Calendar{Week, time.UTC}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)},
		{Calendar{Week, time.UTC}, time.Date(2026, 1, 4, 23, 59, 59, 0, time.UTC), time.Date(2025, 12, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)},
		{Calendar{Week, time.UTC}, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 12, 0, 0, 0, 0, time.UTC)},
	} {
		start, end := tt.cal.Window(tt.at)
		assert.True(t, tt.start.Equal(start), "%s %s: start %s, want %s", tt.cal.Period, tt.at, start, tt.start)
		assert.True(t, tt.end.Equal(end), "%s %s: end %s, want %s", tt.cal.Period, tt.at, end, tt.end)
	}
	start, end := Calendar{Day, paris}.Window(time.Date(2026, 3, 29, 12, 0, 0, 0, paris))
	assert.Equal(t, 23*time.Hour, end.Sub(start))
	start, end = Calendar{Day, paris}.Window(time.Date(2026, 10, 25, 12, 0, 0, 0, paris))
	assert.Equal(t, 25*time.Hour, end.Sub(start))
}

// TestWindowsTile walks the windows of zones whose changes skip or repeat
// midnight (Santiago, Havana, Beirut, São Paulo before 2019, Apia, which
// skipped 2011-12-30): each window starts where the one before ends, at
// the first instant of its local date, and holds every instant in it.
func TestWindowsTile(t *testing.T) {
	zones := []string{"UTC", "Europe/Paris", "America/New_York", "America/Santiago", "America/Havana", "Asia/Beirut",
		"America/Sao_Paulo", "Pacific/Apia", "Australia/Lord_Howe", "Asia/Tehran", "Africa/Cairo"}
	rng := rand.New(rand.NewPCG(1, 2))
	odd := 0 // days that start after 00:00
	for _, name := range zones {
		zone := mustZone(t, name)
		for _, period := range calendars {
			c := Calendar{period, zone}
			t0 := time.Date(2008, 1, 1, 0, 0, 0, 0, time.UTC)
			start, end := c.Window(t0)
			require.False(t, t0.Before(start), "%s %s", name, period)
			for range 800 {
				require.True(t, end.After(start), "%s %s %s", name, period, start)
				y, m, d := start.In(zone).Date()
				by, bm, bd := start.Add(-time.Nanosecond).In(zone).Date()
				require.False(t, by == y && bm == m && bd == d, "%s %s: %s is not the first instant of its date", name, period, start)
				if h, mi, s := start.In(zone).Clock(); h+mi+s != 0 {
					odd++
				}
				switch period {
				case Week:
					require.Equal(t, time.Monday, start.In(zone).Weekday(), "%s %s", name, start)
				case Month:
					require.Equal(t, 1, d, "%s %s", name, start)
				case Year:
					require.True(t, m == 1 && d == 1, "%s %s", name, start)
				}
				in := start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)))))
				s2, e2 := c.Window(in)
				require.True(t, s2.Equal(start) && e2.Equal(end), "%s %s: %s in [%s, %s) got [%s, %s)", name, period, in, start, end, s2, e2)
				s3, e3 := c.Window(end)
				require.True(t, s3.Equal(end), "%s %s: window after %s starts at %s", name, period, end, s3)
				start, end = s3, e3
				if start.Year() > 2040 {
					break
				}
			}
		}
	}
	assert.Positive(t, odd, "no zone skipped a midnight")
}

func TestBounds(t *testing.T) {
	c := Calendar{Month, mustZone(t, "Europe/Paris")}
	b := c.Bounds(time.Date(2028, 2, 15, 0, 0, 0, 0, time.UTC).UnixMicro())
	paris := c.Zone
	want := [4]int64{
		time.Date(2028, 1, 1, 0, 0, 0, 0, paris).UnixMicro(),
		time.Date(2028, 2, 1, 0, 0, 0, 0, paris).UnixMicro(),
		time.Date(2028, 3, 1, 0, 0, 0, 0, paris).UnixMicro(),
		time.Date(2028, 4, 1, 0, 0, 0, 0, paris).UnixMicro(),
	}
	assert.Equal(t, want, b)
	assert.Equal(t, want[2], c.End(want[2]-1))
	assert.Equal(t, want[3], c.End(want[2]))
}

func TestLoadZone(t *testing.T) {
	for _, name := range []string{"", "UTC"} {
		loc, err := LoadZone(name)
		require.NoError(t, err)
		assert.Equal(t, time.UTC, loc)
	}
	_, err := LoadZone("Europe/Pariss")
	assert.EqualError(t, err, `unknown time zone "Europe/Pariss" (want an IANA name such as Europe/Paris or UTC)`)
	_, err = LoadZone("Local")
	assert.ErrorContains(t, err, "each machine's own")
	a, _ := LoadZone("Asia/Tokyo")
	b, _ := LoadZone("Asia/Tokyo")
	assert.Same(t, a, b, "loaded once")
}

func TestCheckCalendar(t *testing.T) {
	for _, l := range []Limit{
		{Calendar: Month, Threshold: 10},
		{Calendar: Day, TZ: "Europe/Paris", Threshold: 10, Algorithm: FixedWindow},
		{Calendar: Year, TZ: "UTC", Threshold: MaxValue},
	} {
		assert.NoError(t, l.Check(), "%+v", l)
	}
	for _, tt := range []struct {
		l     Limit
		field string
		msg   string
	}{
		{Limit{Period: time.Second, TZ: "Europe/Paris", Threshold: 1}, "tz", "tz is for a calendar period (day, week, month, year), not a period of 1s"},
		{Limit{Calendar: "fortnight", Threshold: 1}, "period", `unknown calendar period "fortnight" (want day, week, month, year)`},
		{Limit{Calendar: Month, Period: time.Hour, Threshold: 1}, "period", "period 1h0m0s and calendar period month: a limit has one period"},
		{Limit{Calendar: Month, Threshold: 1, Algorithm: TokenBucket}, "algorithm", "calendar period month is for fixed_window, not token_bucket"},
		{Limit{Calendar: Month, Threshold: 1, TZ: "Mars/Olympus"}, "tz", `unknown time zone "Mars/Olympus" (want an IANA name such as Europe/Paris or UTC)`},
		{Limit{Calendar: Month, Threshold: 0}, "threshold", "threshold 0 is not positive"},
		{Limit{Calendar: Month, Threshold: 1, Burst: 3}, "burst", "burst is for token_bucket and gcra, not fixed_window"},
	} {
		err := tt.l.Check()
		var e *Error
		require.ErrorAs(t, err, &e, "%+v", tt.l)
		assert.Equal(t, tt.field, e.Field, "%+v", tt.l)
		assert.Equal(t, tt.msg, e.Msg, "%+v", tt.l)
	}
	assert.Equal(t, FixedWindow, Limit{Calendar: Week}.AlgorithmName())
}
