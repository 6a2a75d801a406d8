package ratelimit

// Validate reports whether the limit can be decided by this runtime: a
// period of at least 1µs, a positive threshold, an algorithm it implements,
// and Burst or Capacity only where the algorithm uses them, all within the
// ranges the algorithms compute exactly. The error wraps ErrInvalidLimit.
// ratelimitgen calls it to reject such a limit at the directive instead of
// at every call.
func (l Limit) Validate() error { return l.validate() }
