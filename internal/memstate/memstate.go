// Package memstate lets the tests of package redislimit compare each Redis
// key with the state that the in-process limiter, its twin, keeps for the
// same calls. Package ratelimit sets [Lookup] when it is loaded; nothing
// else reads it.
package memstate

// State is what the in-process limiter keeps for one (name, key).
type State struct {
	// Expiry is when the state stops mattering, in µs since the Unix epoch.
	Expiry int64
	// Windows holds, per limit index, the state of a window algorithm
	// (zero for the others).
	Windows []Window
}

// Window is the state of one window limit, the twin's windowState (see
// internal/limitstate/fixedwindow.go), named as the script names it: StateEnd, in ms
// since the Unix epoch, a second before its Redis key's expiry; Count,
// the count of the window a call counts in; Prev, the count of the window
// before (sliding_window).
type Window struct {
	StateEnd, Count, Prev int64
}

// Lookup returns the state that limiter, a *ratelimit.MemoryLimiter,
// keeps for name and key, and whether it keeps any.
var Lookup func(limiter any, name, key string) (State, bool)
