package limitfacts

import (
	"fmt"
	"time"
)

// CheckHold reports why a reservation of units units cannot hold its
// charge to a sliding log of period hold longer than a plain charge (a
// lease's, see ratelimit.OpReserveHeld), or nil: a hold is positive and at
// most a quarter of the period, of 2 units at least of a log that counts
// units (not perCall, which counts calls).
func CheckHold(hold, period time.Duration, perCall bool, units int64) error {
	if hold <= 0 || hold > period/4 || perCall || units < 2 {
		return fmt.Errorf("a hold of %v takes at least 2 units of a sliding log of a period of %v at least four times as long", hold, period)
	}
	return nil
}
