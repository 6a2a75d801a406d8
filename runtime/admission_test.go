package ratelimit

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWithAdmissionRecordsCheckedCalls: a call Check admits with a context
// from WithAdmission, or one derived from it, is recorded with its rule's
// name and the limit with the fewest units remaining.
func TestWithAdmissionRecordsCheckedCalls(t *testing.T) {
	l := NewMemory(WithClock(newManualClock()))
	rule := &Rule{Name: "post", Limits: []Limit{
		{Period: time.Second, Threshold: 2},
		{Period: time.Minute, Threshold: 100},
	}}
	ctx, admission := WithAdmission(context.Background())
	assert.Equal(t, Admission{}, admission(), "nothing recorded yet")

	type key struct{}
	require.NoError(t, rule.Check(context.WithValue(ctx, key{}, 1), l, 1, "ada"))
	a := admission()
	assert.True(t, a.Decided)
	assert.Equal(t, "post", a.Name)
	assert.Equal(t, rule.Limits[0], a.Limit, "the per-second limit has fewer units left")
	assert.Equal(t, int64(1), a.Decision.Remaining)
	assert.True(t, a.Decision.Allowed)
	assert.Equal(t, time.Second, a.Decision.ResetAfter)

	require.NoError(t, rule.Check(ctx, l, 1, "ada"))
	assert.Equal(t, int64(0), admission().Decision.Remaining, "the later call has fewer left")

	err := rule.Check(ctx, l, 1, "ada")
	require.ErrorIs(t, err, ErrLimited)
	assert.Equal(t, int64(0), admission().Decision.Remaining, "a denial is its error, not recorded")
	assert.True(t, admission().Decided)

	_, denied := WithAdmission(context.Background())
	ctx2, admission2 := WithAdmission(context.Background())
	require.ErrorIs(t, rule.Check(ctx2, l, 1, "ada"), ErrLimited)
	assert.Equal(t, Admission{}, admission2(), "only a denial: nothing recorded")
	assert.Equal(t, Admission{}, denied(), "another carrier records nothing")
}

// TestWithAdmissionKeepsTheTightest: of several calls, the admission with
// the fewest units remaining is kept, whatever their order.
func TestWithAdmissionKeepsTheTightest(t *testing.T) {
	l := NewMemory(WithClock(newManualClock()))
	wide := &Rule{Name: "wide", Limits: []Limit{{Period: time.Minute, Threshold: 100}}}
	narrow := &Rule{Name: "narrow", Limits: []Limit{{Period: time.Minute, Threshold: 3}}}
	for _, order := range [][]*Rule{{wide, narrow}, {narrow, wide}} {
		ctx, admission := WithAdmission(context.Background())
		for _, r := range order {
			require.NoError(t, r.Check(ctx, l, 1, order[0].Name))
		}
		assert.Equal(t, "narrow", admission().Name)
		assert.Equal(t, narrow.Limits[0], admission().Limit)
	}
}

// TestWithAdmissionRecordsOnlyDecisions: a shadow rule's call, a call that
// went ahead on a failure and a call decided by Admit are not recorded.
func TestWithAdmissionRecordsOnlyDecisions(t *testing.T) {
	limit := []Limit{{Period: time.Minute, Threshold: 5}}
	ctx, admission := WithAdmission(context.Background())

	shadow := &Rule{Name: "shadow", Limits: limit, Shadow: true}
	require.NoError(t, shadow.Check(ctx, NewMemory(), 1, ""))
	assert.Equal(t, Admission{}, admission(), "shadow limits are not shown")

	open := &Rule{Name: "open", Limits: limit, OnError: FailOpen}
	require.NoError(t, open.Check(ctx, failingLimiter{}, 1, ""))
	assert.Equal(t, Admission{}, admission(), "no decision to show")

	rule := &Rule{Name: "admit", Limits: limit}
	a, err := rule.Admit(ctx, NewMemory(), 1, "")
	require.NoError(t, err)
	assert.Equal(t, "admit", a.Name)
	assert.Equal(t, int64(4), a.Decision.Remaining)
	assert.Equal(t, Admission{}, admission(), "Admit's caller has the admission")
}

// TestWithAdmissionConcurrentCalls: calls record concurrently (run with
// -race), and the tightest admission wins.
func TestWithAdmissionConcurrentCalls(t *testing.T) {
	l := NewMemory(WithClock(newManualClock()))
	rule := &Rule{Name: "n", Limits: []Limit{{Period: time.Minute, Threshold: 50}}}
	ctx, admission := WithAdmission(context.Background())
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			assert.NoError(t, rule.Check(ctx, l, 1, ""))
			_ = admission()
		})
	}
	wg.Wait()
	assert.Equal(t, int64(0), admission().Decision.Remaining)
}

// failingLimiter fails every call as a backend that is down.
type failingLimiter struct{ decidesOnly }

func (failingLimiter) Allow(context.Context, Request) (Decision, error) {
	return Decision{}, fmt.Errorf("%w: down", ErrBackend)
}

// TestRuleClone: a clone has every exported field of the rule, and shares
// nothing that changing it could change in the rule.
func TestRuleClone(t *testing.T) {
	rule := &Rule{}
	v := reflect.ValueOf(rule).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int64:
			f.SetInt(7)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			if f.Type() == reflect.TypeOf([]string(nil)) {
				f.Set(reflect.ValueOf([]string{"user"}))
				break
			}
			if f.Type() == reflect.TypeOf([]bool(nil)) {
				f.Set(reflect.ValueOf([]bool{true}))
				break
			}
			f.Set(reflect.ValueOf([]Limit{{Period: time.Second, Threshold: 3}}))
		default:
			t.Fatalf("Rule.%s: set it here, and clone it", v.Type().Field(i).Name)
		}
	}
	require.NoError(t, rule.Check(context.Background(), NewMemory(), 1, ""), "in use")
	c := rule.Clone()
	assert.NotSame(t, rule, c)
	for i := range v.NumField() {
		if v.Type().Field(i).IsExported() {
			assert.Equal(t, v.Field(i).Interface(), reflect.ValueOf(c).Elem().Field(i).Interface(), v.Type().Field(i).Name)
		}
	}
	c.Limits[0].Threshold = 1
	assert.Equal(t, int64(3), rule.Limits[0].Threshold, "the limits are copied")
	c.KeyExprs[0] = "tenant"
	assert.Equal(t, "user", rule.KeyExprs[0], "the key expressions are copied")
	c.Shared[0], c.KeyHash[0] = "other", false
	assert.Equal(t, "user", rule.Shared[0], "the shared names are copied")
	assert.True(t, rule.KeyHash[0], "the key hashes are copied")
	assert.Nil(t, (*Rule)(nil).Clone())
}
