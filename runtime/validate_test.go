package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requestsHook records the requests it is told about.
type requestsHook struct {
	mu   sync.Mutex
	reqs []Request
}

func (h *requestsHook) Decided(_ context.Context, req *Request, _ Decision) {
	h.mu.Lock()
	h.reqs = append(h.reqs, *req)
	h.mu.Unlock()
}

func (h *requestsHook) Failed(context.Context, *Request, error) {}

// TestRuleValidatesItsLimitsOnce: a Rule's calls skip validating its
// limits after the first, hooks see the request as Rule.Check builds it
// (its rule included, for Request.RedactedKey), and a request that no Rule made, with the same limits or other ones,
// is validated in full. (redislimit's TestHooksSeeRequestsAsBuilt checks
// the same of the Redis limiter.)
func TestRuleValidatesItsLimitsOnce(t *testing.T) {
	ctx := context.Background()
	hook := &requestsHook{}
	l := NewMemory(WithHook(hook))
	{
		rule := &Rule{Name: "once", Limits: []Limit{{Period: time.Hour, Threshold: 3}, {Algorithm: GCRA, Period: time.Hour, Threshold: 5, Burst: 2}}}
		require.NoError(t, rule.Check(ctx, l, 2, "k"))
		require.NotNil(t, rule.prepared())
		assert.Equal(t, []Request{{Name: "once", Key: "k", Cost: 2, Limits: rule.Limits, Rule: rule}}, hook.reqs)

		var ce *CostError
		require.ErrorAs(t, rule.Check(ctx, l, 3, "k"), &ce, "above the burst of 2")
		assert.Equal(t, rule.Limits[1], ce.Limit)

		bad := append([]Limit(nil), rule.Limits...)
		bad[1].Capacity = 4 // not for gcra
		_, err := l.Allow(ctx, Request{Name: "once", Key: "k", Limits: bad})
		require.ErrorIs(t, err, ErrInvalidLimit)
		_, err = l.Allow(ctx, Request{Key: "k", Limits: rule.Limits})
		require.ErrorIs(t, err, ErrInvalidLimit, "no name")
	}
}

// TestRuleWithInvalidLimitsFailsEveryCall: a Rule whose limits no backend
// could decide reports why on every call.
func TestRuleWithInvalidLimitsFailsEveryCall(t *testing.T) {
	rule := &Rule{Name: "bad", Limits: []Limit{{Period: time.Hour}}}
	l := NewMemory()
	for range 3 {
		require.ErrorIs(t, rule.Check(context.Background(), l, 1, ""), ErrInvalidLimit)
	}
	assert.Nil(t, rule.prepared())
}

// TestLimitValidatesItsPrefetch: a Prefetch is positive, and no lease can
// honour one of a leaky bucket or a concurrency limit.
func TestLimitValidatesItsPrefetch(t *testing.T) {
	for _, l := range []Limit{
		{Period: time.Second, Threshold: 5, Prefetch: -time.Millisecond},
		{Algorithm: LeakyBucket, Period: time.Second, Threshold: 5, Prefetch: time.Millisecond},
	} {
		req := Request{Name: "p", Limits: []Limit{l}}
		assert.ErrorIs(t, req.Validate(), ErrInvalidLimit, "%v", l)
	}
	for _, alg := range []Algorithm{SlidingLog, FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		req := Request{Name: "p", Limits: []Limit{{Algorithm: alg, Period: time.Second, Threshold: 5, Prefetch: time.Millisecond}}}
		assert.NoError(t, req.Validate(), "%s", alg)
	}
	assert.Equal(t, "5/1s (fixed_window, prefetch 1ms)", Limit{Algorithm: FixedWindow, Period: time.Second, Threshold: 5, Prefetch: time.Millisecond}.String())
}
