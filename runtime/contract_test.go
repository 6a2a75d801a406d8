package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counting is a wrapper that counts the calls of Allow and the
// operations of Do it sees, and passes each on unchanged (OpPlan too).
type counting struct {
	next  Limiter
	allow int
	ops   map[OpKind]int
}

func (c *counting) Allow(ctx context.Context, req Request) (Decision, error) {
	c.allow++
	return c.next.Allow(ctx, req)
}

func (c *counting) Do(ctx context.Context, op Op) (Result, error) {
	if c.ops == nil {
		c.ops = map[OpKind]int{}
	}
	c.ops[op.Kind]++
	return c.next.Do(ctx, op)
}

func (c *counting) Abilities() Abilities { return c.next.Abilities() }

// TestEveryWrapperSeesEveryOperation: each wrapper of a chain sees each
// operation of the contract a rule makes (peeks, reservations, settles,
// slots, resets), outer first; none is found past it.
func TestEveryWrapperSeesEveryOperation(t *testing.T) {
	ctx := context.Background()
	inner := &counting{next: NewMemory()}
	outer := &counting{next: inner}
	rule := &Rule{Name: "seen", Limits: []Limit{{Period: time.Second, Threshold: 5}, {Algorithm: "concurrency", Threshold: 2}}}
	_, err := rule.Peek(ctx, outer, "k")
	require.NoError(t, err)
	res, err := rule.Reserve(ctx, outer, 2, "k")
	require.NoError(t, err)
	require.NoError(t, res.Settle(ctx, 1))
	require.NoError(t, rule.Reset(ctx, outer, "k"))
	for _, c := range []*counting{outer, inner} {
		assert.Equal(t, 1, c.ops[OpTakeSlot], "the slot taken")
		assert.Equal(t, 1, c.ops[OpAdjust], "the settle")
		assert.Equal(t, 1, c.ops[OpGiveSlot], "the slot given back")
		assert.Equal(t, 1, c.ops[OpReset], "the reset")
		assert.Positive(t, c.ops[OpPeekSlot], "the peek")
	}
}

// TestAnOperationNotSupportedSaysSo: an operation the limiter does not
// report fails with an error wrapping errors.ErrUnsupported, naming it.
func TestAnOperationNotSupportedSaysSo(t *testing.T) {
	_, err := NewMemory().Do(context.Background(), Op{Kind: OpFallback})
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Contains(t, err.Error(), "fallback")
	assert.False(t, NewMemory().Abilities().Can(OpFallback))
	assert.True(t, NewMemory().Abilities().Can(OpReserve))
}

// TestAPlanPassedOnIsNotUsed: Check of a wrapped memory limiter goes
// through the wrapper's Allow, though the wrapper passes on OpPlan
// unchanged (the plan is not the wrapper's own), and decides as the
// memory limiter's plan does.
func TestAPlanPassedOnIsNotUsed(t *testing.T) {
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

// TestThePlanDecidesAsAllowForEveryAlgorithm: for every algorithm, one
// limit and two, the memory limiter's fast path (a call of one key on the
// limiter itself: its Plan, and a bucket's check and charge in one pass)
// makes the decisions that Allow makes of the same calls through a wrapper,
// admissions and denials alike, at random costs and times. (A leaky
// bucket's admitted calls are paced on a cancelled context, so that they
// fail at once with an error that tells their delay.)
func TestThePlanDecidesAsAllowForEveryAlgorithm(t *testing.T) {
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

// TestAPlanDeclinedFallsBackToAllow: a limiter that has no plan for a
// rule has its calls decided by Allow, and is asked once per rule.
func TestAPlanDeclinedFallsBackToAllow(t *testing.T) {
	l := &declining{}
	rule := &Rule{Name: "declined", Limits: []Limit{{Period: time.Second, Threshold: 1}}}
	require.NoError(t, rule.Check(context.Background(), l, 1, "k"))
	require.NoError(t, rule.Check(context.Background(), l, 1, "k"))
	assert.Equal(t, 2, l.allow)
	assert.Equal(t, 1, l.asked, "asked once per rule and limiter")
}

// declining is a limiter that reports plans, and has none.
type declining struct{ allow, asked int }

func (d *declining) Allow(context.Context, Request) (Decision, error) {
	d.allow++
	return Decision{Allowed: true}, nil
}

func (d *declining) Do(_ context.Context, op Op) (Result, error) {
	if op.Kind == OpPlan {
		d.asked++
		return Result{}, nil
	}
	return Result{}, Unsupported(d, op.Kind)
}

func (d *declining) Abilities() Abilities { return Abilities{Ops: OpsOf(OpPlan)} }

// TestDenialsAreCountedAsDoWouldCountThem: a rule's denials on a limiter
// are counted by its plan's CountDenial, and through a wrapper that
// passes OpPlan on by OpCountDenial, which the wrapper sees once per
// denial; both count the same keys, hashed ones as hashed.
func TestDenialsAreCountedAsDoWouldCountThem(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	direct := NewMemory(WithClock(clock))
	wrapped := &counting{next: NewMemory(WithClock(clock))}
	plain := &Rule{Name: "plain", Limits: []Limit{{Period: time.Minute, Threshold: 2}}}
	digest := &Rule{Name: "digest", Limits: []Limit{{Period: time.Minute, Threshold: 1}}, KeyHash: []bool{true}}
	denials := 0
	for i := range 12 {
		for _, rule := range []*Rule{plain, digest} {
			key := fmt.Sprintf("k%d", i%3)
			if rule == digest {
				key = KeyDigest(key)
			}
			errA := rule.Check(ctx, direct, 1, key)
			errB := rule.Check(ctx, wrapped, 1, key)
			require.Equal(t, errA, errB)
			if errA != nil {
				denials++
			}
		}
	}
	require.Equal(t, 12-3*2+12-3, denials)
	assert.Equal(t, denials, wrapped.ops[OpCountDenial], "the wrapper saw each denial counted")
	want, err := direct.Do(ctx, Op{Kind: OpTopDenied, Units: 10})
	require.NoError(t, err)
	got, err := wrapped.Do(ctx, Op{Kind: OpTopDenied, Units: 10})
	require.NoError(t, err)
	assert.Len(t, want.Denied, 6)
	assert.ElementsMatch(t, want.Denied, got.Denied)
	require.NotEqual(t, RedactKey(KeyDigest("k0"), true), RedactKey(KeyDigest("k0"), false))
	for _, k := range want.Denied {
		assert.Equal(t, RedactKey(k.Kept, k.Name == "digest"), k.Key, "%+v: a digest is redacted as one", k)
	}
}
