package ratelimit

import (
	"time"
	_ "unsafe" // for go:linkname
)

// monoMicros returns the time in µs since the Unix epoch: the wall clock's
// when the process started, moved on by the monotonic clock, which never
// steps and is read alone (time.Now reads the wall clock too, and
// time.Since adds about 90 instructions to the read).
func monoMicros() int64 {
	return monoBaseMicro + (nanotime()-monoBaseNano)/int64(time.Microsecond)
}

// nanotime is the runtime's monotonic clock in ns, the one time.Since
// reads. The runtime keeps it reachable for the packages that read it so
// (go.dev/issue/67401, which names github.com/sethvargo/go-limiter among
// them), and promises not to change its signature.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// monoBaseNano is the monotonic clock, and monoBaseMicro the wall clock
// in µs since the Unix epoch, read together when the process started.
var monoBaseNano, monoBaseMicro = monoBase()

// monoBase reads both clocks, the monotonic one first.
func monoBase() (nano, micro int64) {
	nano = nanotime()
	return nano, time.Now().UnixMicro()
}
