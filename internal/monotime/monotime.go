// Package monotime reads the process's monotonic clock as µs since the
// Unix epoch, in one read of the clock: for the limiters and guards that
// decide on the process's own time, which must never step.
package monotime

import (
	"time"
	_ "unsafe" // for go:linkname
)

// Micros returns the time in µs since the Unix epoch: the wall clock's when
// the process started, moved on by the monotonic clock, which never steps
// and is read alone (time.Now reads the wall clock too, and time.Since
// adds about 90 instructions to the read).
func Micros() int64 {
	return baseMicro + (nanotime()-baseNano)/int64(time.Microsecond)
}

// nanotime is the runtime's monotonic clock in ns, the one time.Since
// reads. The runtime keeps it reachable for the packages that read it so
// (go.dev/issue/67401, which names github.com/sethvargo/go-limiter among
// them), and promises not to change its signature.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// baseNano is the monotonic clock, and baseMicro the wall clock in µs
// since the Unix epoch, read together when the process started.
var baseNano, baseMicro = base()

// base reads both clocks, the monotonic one first.
func base() (nano, micro int64) {
	nano = nanotime()
	return nano, time.Now().UnixMicro()
}
