package redislimit

// Close stops the limiter's background work and waits for it to end: it
// ends its leases (giving back what they did not use),
// takes the limiter out of the heartbeat (the last limiter of a client and
// prefix to leave stops it and removes the process from the count, with
// one ZREM bounded by a second) and its client's fence, stops its
// breakers' probes and abandons
// the carry-back of what its fallback admitted, and stops merging its
// denials into the fleet's (those not merged yet are dropped). It does not close the
// client, which the caller owns and closes after (closing the client alone
// also ends the heartbeat and the probes, at their next attempt). A
// limiter still decides calls after Close, but a breaker that opens then
// stays open: nothing probes it. Close may be called more than once.
func (l *Limiter) Close() error {
	l.leases.Close()
	l.stopDenials()
	if l.leaveFence != nil {
		l.leaveFence()
	}
	l.fallback.Close()
	if l.breakers != nil {
		l.breakers.Close()
	}
	return nil
}
