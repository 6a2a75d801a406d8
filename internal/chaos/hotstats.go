package chaos

// A timeline counts calls by the millisecond their decision began and the
// millisecond it returned, on the callers' clock (the host's, which is
// also Redis's). A call's decision was made at some moment between the
// two, so the timeline knows for certain which window a call is in only
// when both fall in it; the window figures count each call that straddles
// a window's edge in both windows it touches, an upper bound that is
// never below what the limiter let through in any window.

// series is a count per millisecond: Counts[i] is the count of ms
// Offset+i after the timeline's base.
type series struct {
	Offset int     `json:"o"`
	Counts []int64 `json:"c"`
}

// trimmed returns the series of counts (a count per ms from the base),
// without its leading and trailing zeros.
func trimmed(counts []int64) series {
	lo, hi := 0, len(counts)
	for lo < hi && counts[lo] == 0 {
		lo++
	}
	for hi > lo && counts[hi-1] == 0 {
		hi--
	}
	return series{Offset: lo, Counts: counts[lo:hi]}
}

// addTo adds s into counts (a count per ms from the base), growing it.
func (s series) addTo(counts *[]int64) {
	if n := s.Offset + len(s.Counts); n > len(*counts) {
		*counts = append(*counts, make([]int64, n-len(*counts))...)
	}
	for i, c := range s.Counts {
		(*counts)[s.Offset+i] += c
	}
}

// timeline is the calls of a run by the ms (from the run's base, a Unix
// time in ms) in which their decision began and returned.
type timeline struct {
	base       int64
	begin, end []int64
	// cumBegin[i] and cumEnd[i] are the calls that began, and returned,
	// before ms i; both have a last element for the whole run.
	cumBegin, cumEnd []int64
}

// newTimeline returns the timeline of the calls counted in begin and end
// (a count per ms from base).
func newTimeline(base int64, begin, end []int64) *timeline {
	n := max(len(begin), len(end))
	t := &timeline{base: base, begin: begin, end: end}
	t.cumBegin, t.cumEnd = cumulative(begin, n), cumulative(end, n)
	return t
}

// cumulative returns the n+1 sums of the first 0 to n counts.
func cumulative(counts []int64, n int) []int64 {
	cum := make([]int64, n+1)
	for i := range n {
		cum[i+1] = cum[i]
		if i < len(counts) {
			cum[i+1] += counts[i]
		}
	}
	return cum
}

// at returns cum's value for ms i, which may be outside the run.
func at(cum []int64, i int) int64 {
	return cum[min(max(i, 0), len(cum)-1)]
}

// calls returns the number of calls in the timeline.
func (t *timeline) calls() int64 { return at(t.cumEnd, len(t.cumEnd)) }

// touching returns the calls whose decision may have been made in the w
// ms from ms s: those that began before its end and returned in it or
// after.
func (t *timeline) touching(s, w int) int64 {
	return at(t.cumBegin, s+w) - at(t.cumEnd, s)
}

// straddling returns the calls that began before ms s and returned in or
// after it: those that straddle the edge between ms s-1 and s.
func (t *timeline) straddling(s int) int64 {
	return at(t.cumBegin, s) - at(t.cumEnd, s)
}

// returned returns the calls that returned in the ms from a to b (Unix
// times in ms, b excluded).
func (t *timeline) returned(a, b int64) int64 {
	return at(t.cumEnd, int(b-t.base)) - at(t.cumEnd, int(a-t.base))
}

// windowFigures are a timeline's worst windows of one length.
type windowFigures struct {
	// Worst is the most calls touching one window aligned on Unix time
	// (the window's start a multiple of its length), straddlers counted in
	// both windows they touch; Certain the most whose decision both began
	// and returned in one.
	Worst, Certain int64
	// Straddling is the number of calls that straddle the edge of two
	// aligned windows.
	Straddling int64
	// Sliding is the most calls touching any span of the length, from
	// any ms; SlidingCertain the most whose decision both began and
	// returned in one.
	Sliding, SlidingCertain int64
}

// windows returns t's figures for windows of w ms.
func (t *timeline) windows(w int) windowFigures {
	var f windowFigures
	n := len(t.cumEnd) - 1
	// The first aligned window that can hold a call of the run.
	first := -int(t.base % int64(w)) // base, a Unix time, is positive
	for s := first; s < n; s += w {
		f.Worst = max(f.Worst, t.touching(s, w))
		f.Certain = max(f.Certain, t.within(s, w))
		if s > 0 {
			f.Straddling += t.straddling(s)
		}
	}
	for s := 1 - w; s < n; s++ {
		f.Sliding = max(f.Sliding, t.touching(s, w))
		f.SlidingCertain = max(f.SlidingCertain, t.within(s, w))
	}
	return f
}

// within returns the calls whose decision began and returned in the w ms
// from ms s: those touching it less those straddling either edge (a call
// longer than w, which the clients' timeouts rule out, would be taken off
// twice).
func (t *timeline) within(s, w int) int64 {
	return t.touching(s, w) - t.straddling(s) - t.straddling(s+w)
}
