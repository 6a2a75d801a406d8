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
	ctx, cancel := context.WithCancel(backgroundContext())
	return &background{ctx: ctx, cancel: cancel}
}

// backgroundKey marks the contexts of the guards' background work.
type backgroundKey struct{}

// backgroundContext returns a context that never ends, marked as the
// guards' background work (see IsBackground).
func backgroundContext() context.Context { return asBackground(context.Background()) }

// asBackground returns ctx marked as the guards' background work.
func asBackground(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// IsBackground reports whether ctx is that of the guards' own work (a
// heartbeat, a mark, a probe, a carry-back), not a call's: a backend that
// holds calls back for a while, as redislimit's fence does, lets it
// through, since the guards' work may be what it waits for.
func IsBackground(ctx context.Context) bool { return ctx.Value(backgroundKey{}) != nil }

// spawn runs f on a goroutine of its own with a context that ends at
// Close, unless Close was called; a nil g runs f with a context that never
// ends.
func (g *background) spawn(f func(ctx context.Context)) {
	if g == nil {
		go f(backgroundContext())
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
