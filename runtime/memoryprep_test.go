package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ruleRequest is the request a rule makes for a call of key.
func ruleRequest(r *Rule, key string) Request {
	return Request{Name: r.Name, Key: key, Limits: r.Limits, Rule: r}
}

// storeLen returns how many rules s holds, counted in its map.
func storeLen(s *ruleStore) int {
	n := 0
	s.m.Range(func(any, any) bool { n++; return true })
	return n
}

func TestMemoryRuleKeptOnceAndRederived(t *testing.T) {
	l := NewMemory(WithClock(newManualClock()))
	r := &Rule{Name: "kept", Limits: []Limit{{Period: time.Hour, Threshold: 1}}}
	req := ruleRequest(r, "a")
	first := l.ruleOf(&req)
	require.NotNil(t, first)
	assert.Same(t, first, l.ruleOf(&req), "a rule's plans are derived once")
	assert.Equal(t, 1, l.rules.len())

	// A rule whose Limits slice is replaced is derived again, under the
	// same entry, and decided by its new limits.
	r.Limits = []Limit{{Period: time.Hour, Threshold: 3}}
	req = ruleRequest(r, "b")
	second := l.ruleOf(&req)
	require.NotSame(t, first, second)
	assert.Equal(t, int64(3), second.plans[0].Threshold)
	assert.Equal(t, 1, l.rules.len())
	for i := range 4 {
		d, err := l.Allow(context.Background(), req)
		require.NoError(t, err)
		assert.Equal(t, i < 3, d.Allowed, "call %d", i)
	}

	// A request with other limits than its rule's (an override's) is
	// decided without the rule's plans, and keeps nothing.
	over := req
	over.Limits = []Limit{{Period: time.Hour, Threshold: 3}}
	assert.Nil(t, l.ruleOf(&over))
	over.Limits, over.Name = r.Limits, "other"
	assert.Nil(t, l.ruleOf(&over))
	assert.Equal(t, 1, l.rules.len())
}

func TestMemoryRuleStoreIsBounded(t *testing.T) {
	ctx := context.Background()
	l := NewMemory(WithClock(newManualClock()))
	kept := &Rule{Name: "kept", Limits: []Limit{{Period: time.Hour, Threshold: 10}}}
	admitted := 0
	for i := range 3 * maxKeptRules {
		r := &Rule{Name: fmt.Sprint("throwaway-", i), Limits: []Limit{{Period: time.Hour, Threshold: 1}}}
		_, err := l.Allow(ctx, ruleRequest(r, "k"))
		require.NoError(t, err)
		require.LessOrEqual(t, l.rules.len(), maxKeptRules)
		if i%100 == 0 { // a long-lived rule, decided the same throughout
			d, err := l.Allow(ctx, ruleRequest(kept, "k"))
			require.NoError(t, err)
			if d.Allowed {
				admitted++
			}
		}
	}
	assert.Equal(t, 10, admitted)
	assert.Equal(t, l.rules.len(), storeLen(&l.rules))
	assert.LessOrEqual(t, storeLen(&l.rules), maxKeptRules)
}

func TestMemoryRulePlanKeepsNothing(t *testing.T) {
	l := NewMemory(WithClock(newManualClock()))
	r := &Rule{Name: "fast", Limits: []Limit{{Period: time.Hour, Threshold: 2}}}
	for i := range 3 {
		err := r.Check(context.Background(), l, 1, "k")
		assert.Equal(t, i < 2, err == nil, "call %d: %v", i, err)
	}
	assert.Equal(t, 0, l.rules.len(), "the fast path keeps its plans in its closure")
}

func TestMemoryRuleStoreConcurrent(t *testing.T) {
	ctx := context.Background()
	l := NewMemory(WithClock(newManualClock()))
	kept := &Rule{Name: "kept", Limits: []Limit{{Period: time.Hour, Threshold: 50}}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range maxKeptRules / 2 { // enough throwaway rules to empty the store
				r := &Rule{Name: fmt.Sprint("throwaway-", g, "-", i), Limits: kept.Limits}
				_, err := l.Allow(ctx, ruleRequest(r, "k"))
				assert.NoError(t, err)
				if i%8 == 0 {
					d, err := l.Allow(ctx, ruleRequest(kept, "k"))
					assert.NoError(t, err)
					if d.Allowed {
						admitted.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(50), admitted.Load())
	assert.LessOrEqual(t, storeLen(&l.rules), maxKeptRules)
	assert.Equal(t, l.rules.len(), storeLen(&l.rules))
}
