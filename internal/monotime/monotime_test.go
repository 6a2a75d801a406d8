package monotime

import (
	"testing"
	"time"
)

// TestMicrosMovesOnAndNeverStepsBack: no read of Micros is earlier than
// the one before it, and it moves on as time passes.
func TestMicrosMovesOnAndNeverStepsBack(t *testing.T) {
	first := Micros()
	last := first
	for range 100_000 {
		now := Micros()
		if now < last {
			t.Fatalf("Micros stepped back: %d after %d", now, last)
		}
		last = now
	}
	time.Sleep(2 * time.Millisecond)
	if Micros()-first < 2000 {
		t.Fatalf("Micros moved %d µs over a sleep of 2ms", Micros()-first)
	}
}
