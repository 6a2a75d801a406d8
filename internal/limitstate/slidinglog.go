package limitstate

import "time"

// logRun is a run of admitted units that share one admission time.
type logRun struct {
	at    int64 // µs
	units int64
	hold  int64 // µs the run weighs past at + period (a held reservation's)
}

// ends returns when the run stops weighing, less a period (µs).
func (r *logRun) ends() int64 { return r.at + r.hold }

// logState is the state of a SlidingLog limit: runs in a ring buffer,
// oldest first, mirroring the Redis list of check sliding_log in
// redislimit/lua/sliding_log.lua.tmpl, which holds one entry per call
// weighted by its cost (a run here may hold several calls logged at one
// time; a held reservation's is a run of its own, as its entry is) and
// its units in O(1), and names start, logged, units, need and newest as
// check and charge do here. Both hold a call in constant space
// and time whatever its cost.
type logState struct {
	runs  []logRun // ring buffer; len is a power of two or zero
	head  int
	count int   // runs in use
	units int64 // sum of units over the runs
}

func (s *logState) at(i int) *logRun {
	return &s.runs[(s.head+i)&(len(s.runs)-1)]
}

// trim drops the runs that left the window (at + hold <= start), from
// the oldest, up to the first that has not: a held run keeps the runs
// behind it until it leaves, as the Redis list keeps them.
func (s *logState) trim(start int64) {
	for s.count > 0 && s.at(0).ends() <= start {
		s.units -= s.at(0).units
		s.head = (s.head + 1) & (len(s.runs) - 1)
		s.count--
	}
	if s.count == 0 {
		s.head = 0
	}
	if len(s.runs) > 16 && s.count < len(s.runs)/4 {
		s.resize(len(s.runs) / 2)
	}
}

// logged returns the time new units are logged at: now, or, as in the
// Redis script, the newest run's time if the clock reads earlier than the
// oldest.
func (s *logState) logged(now int64) int64 {
	if s.count > 0 && now < s.at(0).at {
		return max(now, s.at(s.count-1).at)
	}
	return now
}

// check decides cost units at now for a log of threshold units per period
// (µs) without charging them, describing the decision in d.
func (s *logState) check(period, threshold, now, cost int64, d *Decision) bool {
	start := now - period
	s.trim(start)
	units := s.units + cost // the log's units with the call
	if units <= threshold {
		*d = Decision{
			Remaining:  threshold - units,
			ResetAfter: time.Duration(s.logged(now)+period-now) * time.Microsecond,
		}
		return true
	}
	// The call fits once the need-th oldest unit leaves, and every held
	// run up to it (see trim).
	need := units - threshold
	i, far := 0, int64(0)
	for ; need > s.at(i).units; i++ {
		need -= s.at(i).units
		far = s.held(far, i)
	}
	newest := s.at(s.count - 1).at
	*d = Decision{
		Remaining:  threshold - units + cost,
		RetryAfter: time.Duration(max(s.at(i).at, s.held(far, i))+period-now) * time.Microsecond,
		ResetAfter: time.Duration(newest+period-now) * time.Microsecond,
	}
	return false
}

// held returns far, or run i's ends when it is held and ends later.
func (s *logState) held(far int64, i int) int64 {
	if r := s.at(i); r.hold > 0 {
		return max(far, r.ends())
	}
	return far
}

// charge logs cost units and returns when the window will be empty (µs).
func (s *logState) charge(period, now, cost int64) int64 {
	logged := s.logged(now)
	if s.count > 0 && s.at(s.count-1).at == logged && s.at(s.count-1).hold == 0 {
		s.at(s.count - 1).units += cost
	} else {
		s.push(logRun{at: logged, units: cost})
	}
	s.units += cost
	return logged + period
}

// chargeHeld is charge of cost units that weigh hold µs longer (a held
// reservation's, hold > 0): a run of their own, as they are an entry of
// their own in Redis, which refund takes units off alone.
func (s *logState) chargeHeld(period, now, cost, hold int64) int64 {
	logged := s.logged(now)
	s.push(logRun{at: logged, units: cost, hold: hold})
	s.units += cost
	return logged + hold + period
}

// push appends r as the newest run.
func (s *logState) push(r logRun) {
	if s.count == len(s.runs) {
		s.resize(max(2*len(s.runs), 4))
	}
	s.count++
	*s.at(s.count - 1) = r
}

// resize moves the runs into a ring of size n (a power of two >= count).
func (s *logState) resize(n int) {
	runs := make([]logRun, n)
	for i := 0; i < s.count; i++ {
		runs[i] = *s.at(i)
	}
	s.runs, s.head = runs, 0
}

// refund removes up to n units logged at the time at with hold, newest
// first, unless they left the window; a held run keeps at least 2 units
// or none (see [OpRefundHeld]). Its twin (settle sliding_log) takes them off the
// entries of at and hold from the newest, removing an entry whose units
// all go and lowering the weight of one that keeps some.
func (s *logState) refund(period, now, at, hold, n int64) {
	if at+hold <= now-period {
		return
	}
	emptied := false
	for i := s.count - 1; i >= 0 && n > 0; i-- {
		if r := s.at(i); r.at == at && r.hold == hold {
			d := min(n, r.units)
			if hold > 0 && d == r.units-1 {
				d-- // a held run keeps 2 units rather than 1
			}
			r.units, s.units, n = r.units-d, s.units-d, n-d
			emptied = emptied || r.units == 0
		}
	}
	if !emptied {
		return
	}
	kept := make([]logRun, 0, len(s.runs))
	for i := 0; i < s.count; i++ {
		if r := *s.at(i); r.units > 0 {
			kept = append(kept, r)
		}
	}
	s.runs, s.head, s.count = kept[:len(s.runs)], 0, len(kept)
	if s.count == 0 {
		*s = logState{}
	}
}

// chargeOnTop charges n units without deciding, at most what takes the
// log to twice capacity units, and returns when the window will be empty
// (µs), or 0 when it charged nothing.
func (s *logState) chargeOnTop(period, capacity, now, n int64) int64 {
	s.trim(now - period)
	if n = min(n, 2*capacity-s.units); n <= 0 {
		return 0
	}
	return s.charge(period, now, n)
}
