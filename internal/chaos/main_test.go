package chaos

import (
	"os"
	"testing"
)

// TestMain lets a run's worker processes, which are this test binary
// started again, serve the run.
func TestMain(m *testing.M) {
	WorkerMain()
	os.Exit(m.Run())
}
