package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counting is a Wrapper that counts the calls of Allow and, as a Peeker,
// of Peek it sees.
type counting struct {
	next         Limiter
	allow, peeks int
}

func (c *counting) Allow(ctx context.Context, req Request) (Decision, error) {
	c.allow++
	return c.next.Allow(ctx, req)
}

func (c *counting) Unwrap() Limiter { return c.next }

// peeking is counting that also sees Peek.
type peeking struct{ counting }

func (p *peeking) Peek(ctx context.Context, req Request) (Decision, error) {
	p.peeks++
	return Peek(ctx, p.next, req)
}

// TestAsFindsACapabilityOneStepAtATime: a wrapper that implements a
// capability sees its calls even inside another wrapper, which passes
// them on; one that does not passes them on to what it wraps.
func TestAsFindsACapabilityOneStepAtATime(t *testing.T) {
	ctx := context.Background()
	mem := NewMemory()
	inner := &peeking{counting{next: mem}}
	outer := &counting{next: inner}
	req := Request{Name: "as", Key: "k", Limits: []Limit{{Period: time.Second, Threshold: 2}}}

	p, ok := As[Peeker](outer)
	require.True(t, ok)
	assert.Same(t, inner, p, "the first Peeker of the chain")
	_, err := Peek(ctx, outer, req)
	require.NoError(t, err)
	assert.Equal(t, 1, inner.peeks, "the middle wrapper saw the Peek")

	r, ok := As[Reserver](outer)
	require.True(t, ok)
	assert.Same(t, mem, r, "no wrapper reserves: the memory limiter does")
	_, ok = As[SlotHolder](&counting{next: allowOnly{}})
	assert.False(t, ok, "nothing in the chain holds slots")
	_, ok = As[Peeker](nil)
	assert.False(t, ok)
}

// allowOnly decides every call, and offers nothing else.
type allowOnly struct{}

func (allowOnly) Allow(context.Context, Request) (Decision, error) {
	return Decision{Allowed: true}, nil
}

// TestRuleDeciderIsNeverReachedThroughAWrapper: Check of a wrapped memory
// limiter goes through the wrapper's Allow, whose calls the memory limiter's
// fast path (DecideRule) would skip, and decides as the fast path does.
func TestRuleDeciderIsNeverReachedThroughAWrapper(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	wrapped := &counting{next: NewMemory(WithClock(clock))}
	direct := NewMemory(WithClock(clock))
	rule := &Rule{Name: "fast", Limits: []Limit{{Algorithm: TokenBucket, Period: time.Second, Threshold: 3}}}
	for i := range 10 {
		a, errA := rule.Admit(ctx, direct, int64(i%2), "k")
		b, errB := rule.Admit(ctx, wrapped, int64(i%2), "k")
		assert.Equal(t, errA, errB, "call %d", i)
		assert.Equal(t, a, b, "call %d", i)
		clock.Advance(100 * time.Millisecond)
	}
	assert.Equal(t, 10, wrapped.allow, "the wrapper saw every call")
}

// TestRuleDeciderNilFallsBackToAllow: a RuleDecider that declines a rule
// has its calls decided by Allow.
func TestRuleDeciderNilFallsBackToAllow(t *testing.T) {
	l := &declining{}
	rule := &Rule{Name: "declined", Limits: []Limit{{Period: time.Second, Threshold: 1}}}
	require.NoError(t, rule.Check(context.Background(), l, 1, "k"))
	require.NoError(t, rule.Check(context.Background(), l, 1, "k"))
	assert.Equal(t, 2, l.allow)
	assert.Equal(t, 1, l.asked, "asked once per rule and limiter")
}

// declining is a RuleDecider that declines every rule.
type declining struct{ allow, asked int }

func (d *declining) Allow(context.Context, Request) (Decision, error) {
	d.allow++
	return Decision{Allowed: true}, nil
}

func (d *declining) DecideRule(*Rule) func(context.Context, string, int64) (Decision, error) {
	d.asked++
	return nil
}
