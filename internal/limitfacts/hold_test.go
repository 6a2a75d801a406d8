package limitfacts

import (
	"testing"
	"time"
)

func TestCheckHold(t *testing.T) {
	for _, c := range []struct {
		hold, period time.Duration
		perCall      bool
		units        int64
		ok           bool
	}{
		{time.Second, 4 * time.Second, false, 2, true},
		{time.Second, 4*time.Second - 1, false, 2, false}, // more than a quarter period
		{0, time.Minute, false, 2, false},
		{-time.Second, time.Minute, false, 2, false},
		{time.Second, time.Minute, true, 2, false}, // a log of calls
		{time.Second, time.Minute, false, 1, false},
	} {
		if err := CheckHold(c.hold, c.period, c.perCall, c.units); (err == nil) != c.ok {
			t.Errorf("CheckHold(%v, %v, %v, %d) = %v, want ok %v", c.hold, c.period, c.perCall, c.units, err, c.ok)
		}
	}
}
