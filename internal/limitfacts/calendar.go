package limitfacts

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// The calendar periods, as directives (period=month) and overrides write
// them. A calendar period's windows start at local midnight in its zone:
// each day; each Monday (weeks are ISO weeks); the 1st of each month; the
// 1st of January.
const (
	Day   = "day"
	Week  = "week"
	Month = "month"
	Year  = "year"
)

// calendars lists the calendar periods, in the order messages list them.
var calendars = [...]string{Day, Week, Month, Year}

// Calendars returns the calendar periods, in a fixed order.
func Calendars() []string { return append([]string(nil), calendars[:]...) }

// IsCalendar reports whether s names a calendar period.
func IsCalendar(s string) bool {
	for _, c := range calendars {
		if c == s {
			return true
		}
	}
	return false
}

// CalendarAlgorithm is the algorithm of a calendar period that names
// none: a fixed window, whose windows are the calendar's. Which algorithms
// count calendar periods at all is their [Algorithm.Calendar].
const CalendarAlgorithm = FixedWindow

// zones caches the zones LoadZone loaded: name → *time.Location.
var zones sync.Map

// LoadZone returns the IANA time zone called name (such as Europe/Paris),
// UTC for "" and "UTC", loading each once (time.LoadLocation reads the
// system's tz database, or the one embedded by importing time/tzdata).
// "Local", which each machine reads as its own zone, is an error: the
// processes sharing a limit must agree on its windows.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if name == "Local" || strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("time zone %q is each machine's own: name an IANA zone such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (want an IANA name such as Europe/Paris or UTC)", name)
	}
	zones.Store(name, loc)
	return loc, nil
}

// Calendar is a calendar period in a zone: its windows.
type Calendar struct {
	// Period is Day, Week, Month or Year.
	Period string
	// Zone is the zone whose midnights start the windows.
	Zone *time.Location
}

// Window returns the window of c that holds t: [start, end), the first
// instants of t's local day, week, month or year and of the next. A day
// lasts 23 or 25 hours where a zone changes its offset. A midnight that a
// zone change skips or repeats starts its day at the first instant whose
// local date is that day's.
func (c Calendar) Window(t time.Time) (start, end time.Time) {
	y, m, d := t.In(c.Zone).Date()
	var ny, nm, nd int
	switch c.Period {
	case Day:
		ny, nm, nd = y, int(m), d+1
	case Week:
		d -= (int(time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday()) + 6) % 7 // back to Monday
		ny, nm, nd = y, int(m), d+7
	case Month:
		d, ny, nm, nd = 1, y, int(m)+1, 1
	default: // Year
		m, d, ny, nm, nd = time.January, 1, y+1, 1, 1
	}
	return c.midnight(y, int(m), d), c.midnight(ny, nm, nd)
}

// Bounds returns the starts of four windows of c in a row, in µs since
// the Unix epoch: the previous window's, that of the window holding us
// (µs since the epoch), the next one's and the one after's (its end).
func (c Calendar) Bounds(us int64) [4]int64 {
	start, next := c.Window(time.UnixMicro(us))
	prev, _ := c.Window(start.Add(-time.Nanosecond))
	_, after := c.Window(next)
	return [4]int64{prev.UnixMicro(), start.UnixMicro(), next.UnixMicro(), after.UnixMicro()}
}

// End returns the end of the window of c that holds us, in µs since the
// Unix epoch.
func (c Calendar) End(us int64) int64 {
	_, end := c.Window(time.UnixMicro(us))
	return end.UnixMicro()
}

// midnight returns the first instant of the local date y-m-d (normalized,
// as time.Date normalizes it) in c's zone.
func (c Calendar) midnight(y, m, d int) time.Time {
	y1, m1, d1 := time.Date(y, time.Month(m), d, 12, 0, 0, 0, time.UTC).Date()
	t := time.Date(y1, m1, d1, 0, 0, 0, 0, c.Zone)
	if ty, tm, td := t.Date(); ty != y1 || tm != m1 || td != d1 {
		// time.Date went back across a skipped midnight: the day starts
		// where the zone t is in ends.
		_, end := t.ZoneBounds()
		return end
	}
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t // a zone that never changes
	}
	// A repeated midnight: if the zone before t's had reached the date
	// already, the day started in it.
	before := start.Add(-time.Nanosecond)
	if by, bm, bd := before.Date(); by == y1 && bm == m1 && bd == d1 {
		_, off := before.Zone()
		return time.Date(y1, m1, d1, 0, 0, 0, 0, time.FixedZone("", off)).In(c.Zone)
	}
	return t
}
