package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// TestRuleDeciderDecidesAsAllowForEveryAlgorithm: for every algorithm, one
// limit and two, the memory limiter's fast path (a call of one key on the
// limiter itself: DecideRule, and a bucket's check and charge in one pass)
// makes the decisions that Allow makes of the same calls through a wrapper,
// admissions and denials alike, at random costs and times. (A leaky
// bucket's admitted calls are paced on a cancelled context, so that they
// fail at once with an error that tells their delay.)
func TestRuleDeciderDecidesAsAllowForEveryAlgorithm(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, alg := range Algorithms() {
		if isConcurrency(Limit{Algorithm: alg}) {
			continue // checked by Rule.Reserve, never by the fast path
		}
		for _, limits := range [][]Limit{
			{{Algorithm: alg, Period: time.Second, Threshold: 7}},
			{{Algorithm: alg, Period: time.Second, Threshold: 7}, {Algorithm: alg, Period: 3 * time.Second, Threshold: 12}},
		} {
			t.Run(fmt.Sprintf("%s/%d", alg, len(limits)), func(t *testing.T) {
				ctx := context.Background()
				if alg == LeakyBucket {
					ctx = cancelled
				}
				clock := newManualClock()
				direct := NewMemory(WithClock(clock))
				wrapped := &counting{next: NewMemory(WithClock(clock))}
				rule := &Rule{Name: "fast", Limits: limits}
				denied := 0
				for i := range 400 {
					cost := rng.Int64N(4)
					a, errA := rule.Admit(ctx, direct, cost, "k")
					b, errB := rule.Admit(ctx, wrapped, cost, "k")
					require.Equal(t, errB, errA, "call %d, cost %d", i, cost)
					require.Equal(t, b, a, "call %d, cost %d", i, cost)
					if errA != nil {
						denied++
					}
					clock.Advance(time.Duration(rng.Int64N(int64(60 * time.Millisecond))))
				}
				assert.Equal(t, 400, wrapped.allow, "the wrapper saw every call")
				assert.Greater(t, denied, 20, "the calls cross the limits")
			})
		}
	}
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
