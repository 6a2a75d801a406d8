package basic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// fakeStore records the calls that reach it.
type fakeStore struct {
	calls map[string]int
}

func newFake() *fakeStore { return &fakeStore{calls: map[string]int{}} }

func (f *fakeStore) Get(_ context.Context, id string) (*Item, error) {
	f.calls["Get"]++
	return &Item{ID: id}, nil
}

func (f *fakeStore) Put(_ context.Context, item Item) error {
	f.calls["Put"]++
	if item.ID == "" {
		return errors.New("empty id")
	}
	return nil
}

func (f *fakeStore) Count(prefix string) (int, error) {
	f.calls["Count"]++
	return len(prefix), nil
}

func (f *fakeStore) List(context.Context) ([]Item, error) {
	f.calls["List"]++
	return []Item{{ID: "x"}}, nil
}

func (f *fakeStore) Close() error {
	f.calls["Close"]++
	return nil
}

var ctx = context.Background()

func TestGetAdmitsExactlyThresholdPerKey(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		fake := newFake()
		s := NewStoreWithRateLimit(fake, limiter)
		for range 2 {
			item, err := s.Get(ctx, "a")
			require.NoError(t, err)
			require.Equal(t, "a", item.ID, "results pass through")
		}
		item, err := s.Get(ctx, "a")
		require.Nil(t, item, "a denied call returns zero values")
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Positive(t, le.RetryAfter)
		require.Equal(t, "a", le.Key)
		require.Equal(t, "github.com/ratelimitgen/ratelimitgen/testdata/basic.Store.Get", le.Name)
		require.Equal(t, 2, fake.calls["Get"], "a denied call does not reach the wrapped store")

		_, err = s.Get(ctx, "b")
		require.NoError(t, err, "another key has its own limit")
	})
}

func TestAllLimitsOfAMethodMustAdmit(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		fake := newFake()
		s := NewStoreWithRateLimit(fake, limiter)
		for range 10 {
			require.NoError(t, s.Put(ctx, Item{ID: "i", Owner: 7}))
		}
		err := s.Put(ctx, Item{ID: "i", Owner: 7})
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "7", le.Key, "keyed by item.Owner in decimal")
		require.Equal(t, ratelimit.Limit{Period: 1e9, Threshold: 10}, le.Limit, "the per-second limit denies")
		require.EqualError(t, s.Put(ctx, Item{Owner: 8}), "empty id", "the wrapped error passes through")
	})
}

func TestMethodWithoutContext(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := NewStoreWithRateLimit(newFake(), limiter)
		for range 3 {
			n, err := s.Count("abc")
			require.NoError(t, err)
			require.Equal(t, 3, n)
		}
		n, err := s.Count("abc")
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.Zero(t, n)
	})
}

func TestUnlimitedMethodsAreNotLimited(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		fake := newFake()
		s := NewStoreWithRateLimit(fake, limiter)
		for range 50 {
			items, err := s.List(ctx)
			require.NoError(t, err)
			require.Len(t, items, 1)
			require.NoError(t, s.Close())
		}
		require.Equal(t, 50, fake.calls["List"])
		require.Equal(t, 50, fake.calls["Close"])
	})
}

// TestRateLimitRules: the generated RateLimitRules returns every rule, in
// order, as copies in a new slice: changing them changes no decorator.
func TestRateLimitRules(t *testing.T) {
	rules := RateLimitRules()
	var names []string
	for _, r := range rules {
		names = append(names, r.Name)
	}
	const pkg = "github.com/ratelimitgen/ratelimitgen/testdata/basic."
	require.Equal(t, []string{pkg + "Store.Count", pkg + "Store.Get", pkg + "Store.Put"}, names)
	require.Equal(t, []ratelimit.Limit{{Period: 30 * time.Second, Threshold: 2}}, rules[1].Limits)
	require.Len(t, rules[2].Limits, 2)

	rules[1].Limits[0].Threshold = 100
	rules[0] = nil
	again := RateLimitRules()
	require.NotNil(t, again[0], "a new slice")
	require.Equal(t, int64(2), again[1].Limits[0].Threshold, "copies of the rules")
	s := NewStoreWithRateLimit(newFake(), ratelimit.NewMemory())
	for range 2 {
		_, err := s.Get(ctx, "a")
		require.NoError(t, err)
	}
	_, err := s.Get(ctx, "a")
	require.ErrorIs(t, err, ratelimit.ErrLimited, "the decorator's rule is unchanged")
}

// TestDecoratedCallsRecordTheirAdmission: a call made with a context from
// ratelimit.WithAdmission records the limit with the fewest units left,
// what remains of it and when it resets; a method without a context
// cannot record one.
func TestDecoratedCallsRecordTheirAdmission(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		s := NewStoreWithRateLimit(newFake(), limiter)
		getCtx, admission := ratelimit.WithAdmission(ctx)
		_, err := s.Get(getCtx, "a")
		require.NoError(t, err)
		a := admission()
		require.True(t, a.Decided)
		require.Equal(t, "github.com/ratelimitgen/ratelimitgen/testdata/basic.Store.Get", a.Name)
		require.Equal(t, ratelimit.Limit{Period: 30 * time.Second, Threshold: 2}, a.Limit)
		require.Equal(t, int64(1), a.Decision.Remaining)
		require.Positive(t, a.Decision.ResetAfter)
		require.LessOrEqual(t, a.Decision.ResetAfter, 30*time.Second)

		putCtx, admission := ratelimit.WithAdmission(ctx)
		require.NoError(t, s.Put(putCtx, Item{ID: "x", Owner: 7}))
		require.Equal(t, ratelimit.Limit{Period: time.Second, Threshold: 10}, admission().Limit, "of two limits, the one with fewer units left")
		require.Equal(t, int64(9), admission().Decision.Remaining)

		countCtx, admission := ratelimit.WithAdmission(ctx)
		_, err = s.Count("p")
		require.NoError(t, err)
		_, _ = s.List(countCtx)
		require.False(t, admission().Decided, "Count has no context; List is not limited")
	})
}

// TestConstructorRefusesNil: the constructor given a nil next or a nil
// limiter, untyped or a nil pointer in the interface (a typed nil), panics
// at once, naming the argument, as http.Handle does with a nil handler; a
// decorator that would fail at its first call (a nil limiter), or after
// the limiter charged it (a nil next), is never made.
func TestConstructorRefusesNil(t *testing.T) {
	limiter := ratelimit.NewMemory()
	var nilStore *fakeStore
	var nilLimiter *redislimit.Limiter
	for _, next := range []Store{nil, nilStore} {
		require.PanicsWithValue(t, "basic.NewStoreWithRateLimit: next is nil: want the Store whose calls it limits", func() {
			NewStoreWithRateLimit(next, limiter)
		}, "next %#v", next)
	}
	for _, l := range []ratelimit.Limiter{nil, nilLimiter, (*ratelimit.MemoryLimiter)(nil)} {
		require.PanicsWithValue(t, "basic.NewStoreWithRateLimit: limiter is nil: want a ratelimit.Limiter, such as ratelimit.NewMemory()", func() {
			NewStoreWithRateLimit(newFake(), l)
		}, "limiter %#v", l)
	}
	// Nothing was charged: the rule's first calls are all admitted.
	d := NewStoreWithRateLimit(newFake(), limiter)
	for range 2 {
		_, err := d.Get(context.Background(), "x")
		require.NoError(t, err)
	}
}
