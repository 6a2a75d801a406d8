// Package clocktest provides a clock that moves only when a test moves it,
// for the tests of both limiters.
package clocktest

import (
	"sync"
	"time"
)

// Manual is a clock that moves only when told. Its zero value is not
// ready: make one with [NewManual].
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a clock that starts in 2100, after any test server's
// clock: the keys of the window algorithms expire in Redis at times read
// from it, which must not be earlier than the server's.
func NewManual() *Manual {
	return &Manual{now: time.Unix(1_700_000_000+28_000*86_400, 0)}
}

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to now.
func (c *Manual) Set(now time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}
