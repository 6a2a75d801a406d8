package redislimit

import (
	"context"
	"sync"
)

// background runs a limiter's goroutines (its breakers' probes and
// carry-backs) until [Limiter.Close].
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// spawn runs f on a goroutine of its own with a context that ends at
// Close, unless Close was called; a nil g runs f with a context that never
// ends.
func (g *background) spawn(f func(ctx context.Context)) {
	if g == nil {
		go f(context.Background())
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(g.ctx)
	}()
}

// close ends the context of the goroutines and waits for them to return.
func (g *background) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}

// Close stops the limiter's background work and waits for it to end: it
// takes the limiter out of the heartbeat (the last limiter of a client and
// prefix to leave stops it and removes the process from the count, with
// one ZREM bounded by a second), stops its breakers' probes and abandons
// the carry-back of what its fallback admitted. It does not close the
// client, which the caller owns and closes after (closing the client alone
// also ends the heartbeat and the probes, at their next attempt). A
// limiter still decides calls after Close, but a breaker that opens then
// stays open: nothing probes it. Close may be called more than once.
func (l *Limiter) Close() error {
	l.leaveFleet()
	if l.breakers != nil {
		l.breakers.Close()
	}
	l.bg.close()
	return nil
}
