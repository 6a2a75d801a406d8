package guard

import (
	"context"
	"sync"
)

// background runs a guard's goroutines (its breakers' probes and
// recoveries) until it is closed.
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
