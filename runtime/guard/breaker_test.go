package guard

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// breakerEvents is a BreakerHook that records what it is told.
type breakerEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *breakerEvents) BreakerOpened(node string, err error) {
	e.add(fmt.Sprintf("opened %s: %v", node, err))
}

func (e *breakerEvents) BreakerClosed(node string, open time.Duration) {
	e.add(fmt.Sprintf("closed %s after %v", node, open))
}

func (e *breakerEvents) add(ev string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

func (e *breakerEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.events...)
}

// fakeProbe drives a breaker's probe by hand: the test sees each wait the
// probe asks for, ends it, and answers each probe, on a clock it moves.
type fakeProbe struct {
	clock   atomic.Int64 // Unix ns
	waits   chan time.Duration
	tick    chan time.Time
	answers chan func() error
}

func newFakeProbe(b *breaker) *fakeProbe {
	f := &fakeProbe{waits: make(chan time.Duration, 1), tick: make(chan time.Time), answers: make(chan func() error)}
	f.clock.Store(time.Unix(1_700_000_000, 0).UnixNano())
	b.now = func() time.Time { return time.Unix(0, f.clock.Load()) }
	b.after = func(d time.Duration) <-chan time.Time {
		f.waits <- d
		return f.tick
	}
	b.ask = func(context.Context) error { return (<-f.answers)() }
	// As a Redis backend judges them: a reply that the server is loading
	// says it cannot serve; one that it wants AUTH, that it is up.
	b.unavailable = func(err error) bool { return !strings.HasPrefix(err.Error(), "NOAUTH") }
	return f
}

func (f *fakeProbe) advance(d time.Duration) { f.clock.Add(int64(d)) }

// probe expects the probe to wait want, ends the wait and answers its
// probe with answer, after the probe took took.
func (f *fakeProbe) probe(t *testing.T, want, took time.Duration, answer error) {
	t.Helper()
	select {
	case got := <-f.waits:
		require.Equal(t, want, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the probe did not wait")
	}
	f.advance(want)
	f.tick <- time.Time{}
	f.answers <- func() error { f.advance(took); return answer }
}

func TestBreakerStates(t *testing.T) {
	events := &breakerEvents{}
	b := newBreaker(breakerConfig{failures: 3, backoff: time.Second, maxBackoff: 3 * time.Second}, "node:1", nil, events)
	f := newFakeProbe(b)
	down := errors.New("connection refused")

	for range 2 {
		require.True(t, b.allow())
		b.failed(down)
	}
	b.succeeded()
	for range 2 {
		b.failed(down)
	}
	assert.False(t, b.open(), "a success resets the count: 2 failures in a row so far")
	assert.Empty(t, events.list())
	b.failed(down)
	assert.True(t, b.open())
	assert.False(t, b.allow(), "an open breaker refuses every call")
	assert.Equal(t, []string{"opened node:1: connection refused"}, events.list())

	// The probe waits the back-off, then doubles it after each failed
	// probe, counting from when the probe began, up to the maximum.
	f.probe(t, time.Second, 500*time.Millisecond, down)
	f.probe(t, 1500*time.Millisecond, 0, down)
	f.probe(t, 3*time.Second, 0, down)
	f.probe(t, 3*time.Second, 5*time.Second, down) // took longer than the wait
	assert.False(t, b.allow())
	b.failed(down) // a call sent before the breaker opened
	f.probe(t, 0, 0, errors.New("LOADING Redis is loading the dataset in memory"))
	f.probe(t, 3*time.Second, 0, nil)
	waitClosed(t, b, events, 2)
	assert.True(t, b.allow())
	assert.Equal(t, "closed node:1 after 17s", events.list()[1])

	// Open again: the wait starts from the back-off, and a call that the
	// node answers late closes the breaker and ends the probe.
	for range 3 {
		b.failed(down)
	}
	require.True(t, b.open())
	require.Equal(t, time.Second, <-f.waits)
	require.True(t, probing(b))
	b.succeeded()
	assertNoProbe(t, b)
	assert.False(t, b.open())
	require.Len(t, events.list(), 4)

	// A reply that is not about the node being down closes it too; a
	// closed backend ends the probe and leaves the breaker open.
	for range 3 {
		b.failed(down)
	}
	f.probe(t, time.Second, 0, errors.New("NOAUTH Authentication required."))
	waitClosed(t, b, events, 6)
	for range 3 {
		b.failed(down)
	}
	f.probe(t, time.Second, 0, ErrClosed)
	assertNoProbe(t, b)
	assert.True(t, b.open())
	assert.Len(t, events.list(), 7)
}

// waitClosed waits until the probe has closed b and events holds n events.
func waitClosed(t *testing.T, b *breaker, events *breakerEvents, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return !b.open() && len(events.list()) == n }, time.Minute, time.Millisecond, "the probe did not close the breaker")
}

// assertNoProbe waits, under a generous deadline, until no goroutine runs
// the probe of b (a stack names a method's receiver as its first
// argument): a probe ends when its breaker closes or its client is closed.
func assertNoProbe(t *testing.T, b *breaker) {
	t.Helper()
	require.Eventually(t, func() bool { return !probing(b) }, time.Minute, 10*time.Millisecond, "the breaker's probe goroutine is left")
}

// probing reports whether a goroutine runs the probe of b.
func probing(b *breaker) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fmt.Sprintf("(*breaker).probe(%p", b))
}
