package algorithms

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// impl counts the calls that reach it.
type impl struct {
	mu    sync.Mutex
	calls map[string]int
}

func (i *impl) hit(name string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.calls[name]++
	return nil
}

func (i *impl) Log(context.Context) error        { return i.hit("Log") }
func (i *impl) Fixed(context.Context) error      { return i.hit("Fixed") }
func (i *impl) Window(context.Context) error     { return i.hit("Window") }
func (i *impl) Bucket(context.Context) error     { return i.hit("Bucket") }
func (i *impl) Cell(context.Context) error       { return i.hit("Cell") }
func (i *impl) Paced(context.Context) error      { return i.hit("Paced") }
func (i *impl) Patient(context.Context) error    { return i.hit("Patient") }
func (i *impl) Rollout(context.Context) error    { return i.hit("Rollout") }
func (i *impl) Mixed(context.Context, int) error { return i.hit("Mixed") }

var ctx = context.Background()

func newAPI(limiter ratelimit.Limiter) (*APIWithRateLimit, *impl) {
	i := &impl{calls: map[string]int{}}
	return NewAPIWithRateLimit(i, limiter), i
}

// admitted calls f until it is denied (at most limit+5 times) and returns
// how many calls were admitted and the denial.
func admitted(t *testing.T, limit int, f func(context.Context) error) (int, *ratelimit.LimitError) {
	t.Helper()
	for n := 0; n < limit+5; n++ {
		err := f(ctx)
		if err == nil {
			continue
		}
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		return n, le
	}
	t.Fatalf("never denied after %d calls", limit+5)
	return 0, nil
}

func TestEveryAlgorithmAdmitsItsBurstThenDenies(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		api, i := newAPI(limiter)
		for name, f := range map[string]func(context.Context) error{
			"Log": api.Log, "Fixed": api.Fixed, "Window": api.Window, "Bucket": api.Bucket, "Cell": api.Cell,
		} {
			n, le := admitted(t, 3, f)
			require.Equal(t, 3, n, name)
			require.Equal(t, 3, i.calls[name], "%s: denied calls do not reach the implementation", name)
			require.Positive(t, le.RetryAfter, name)
		}
	})
}

func TestLeakyBucketPacesThenDenies(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		api, i := newAPI(limiter)
		// Four calls at once: the queue holds two (the one leaving now and
		// one paced 100ms behind it); the other two find it full.
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for n := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[n] = api.Paced(ctx) }()
		}
		wg.Wait()
		denied := 0
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, ratelimit.ErrLimited)
				denied++
			}
		}
		require.Equal(t, 2, denied)
		require.Equal(t, 2, i.calls["Paced"])
	})
}

func TestWaitAdmitsInsteadOfDenying(t *testing.T) {
	backends.EachOnRealClock(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		api, i := newAPI(limiter)
		for range 3 {
			require.NoError(t, api.Patient(ctx), "each call waits for the next 200ms window")
		}
		require.Equal(t, 3, i.calls["Patient"])
	})
}

func TestShadowNeverDeniesButReports(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		var m limitmetrics.Metrics
		observed := observe(t, limiter, &m)
		api, i := newAPI(observed)
		for range 5 {
			require.NoError(t, api.Rollout(ctx))
		}
		require.Equal(t, 5, i.calls["Rollout"])
		c := m.Snapshot()[rolloutName]
		require.Equal(t, uint64(1), c.Allowed)
		require.Equal(t, uint64(4), c.ShadowLimited)
		require.Zero(t, c.Limited)
	})
}

func TestMixedAlgorithmsMustBothAdmit(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		api, _ := newAPI(limiter)
		n, le := admitted(t, 2, func(ctx context.Context) error { return api.Mixed(ctx, 1) })
		require.Equal(t, 2, n, "the bucket's burst of 2 denies first")
		require.Equal(t, ratelimit.TokenBucket, le.Limit.Algorithm)
	})
}
