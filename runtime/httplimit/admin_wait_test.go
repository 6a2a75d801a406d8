package httplimit

import (
	"testing"
	"time"
)

// TestShownWaitsRoundUp: the admin view writes a wait rounded up to a unit
// a person reads (never shorter than the wait, so a caller who waits what
// it reads is not early), and ParseDuration reads it back.
func TestShownWaitsRoundUp(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                           "0s",
		-time.Second:                "0s",
		1500 * time.Microsecond:     "2ms",
		999 * time.Millisecond:      "999ms",
		time.Second:                 "1s",
		1234 * time.Millisecond:     "1.3s",
		50942722 * time.Microsecond: "51s",
		74*time.Hour + 21*time.Minute + 12140512*time.Microsecond: "74h21m13s",
		time.Minute: "1m0s",
	} {
		got := shown(d)
		if got != want {
			t.Errorf("shown(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(got); err != nil || back < d {
			t.Errorf("shown(%v) = %q reads back as %v, %v: shorter than the wait", d, got, back, err)
		}
	}
}
