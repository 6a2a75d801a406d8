package calendar

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type impl struct{}

func (impl) Monthly(context.Context, string) error { return nil }
func (impl) Daily(context.Context) error           { return nil }
func (impl) Weekly(context.Context) error          { return nil }
func (impl) Yearly(context.Context) error          { return nil }

func (impl) Tokens(context.Context, string, int64) (int64, error) { return 0, nil }

// model is Quotas whose Tokens takes a time on the clock and uses the
// tokens it is told.
type model struct {
	impl
	clock *clocktest.Manual
	took  time.Duration
	used  int64
}

func (m *model) Tokens(context.Context, string, int64) (int64, error) {
	m.clock.Advance(m.took)
	return m.used, nil
}

var ctx = context.Background()

// each runs f on the memory limiter and on Redis, both on clock.
func each(t *testing.T, f func(t *testing.T, q *QuotasWithRateLimit, clock *clocktest.Manual)) {
	eachWith(t, func(*clocktest.Manual) Quotas { return impl{} }, f)
}

// eachWith is each, with the Quotas next makes on the clock wrapped.
func eachWith(t *testing.T, next func(*clocktest.Manual) Quotas, f func(t *testing.T, q *QuotasWithRateLimit, clock *clocktest.Manual)) {
	t.Run("memory", func(t *testing.T) {
		clock := clocktest.NewManual()
		f(t, NewQuotasWithRateLimit(next(clock), ratelimit.NewMemory(ratelimit.WithClock(clock))), clock)
	})
	t.Run("redis", func(t *testing.T) {
		srv.Flush(t)
		client := srv.Client()
		t.Cleanup(func() { client.Close() })
		clock := clocktest.NewManual()
		f(t, NewQuotasWithRateLimit(next(clock), redislimit.New(client, ratelimit.WithClock(clock))), clock)
	})
}

// retryAfter returns how long a denied call is told to wait, or fails.
func retryAfter(t *testing.T, err error) time.Duration {
	t.Helper()
	var le *ratelimit.LimitError
	require.True(t, errors.As(err, &le), "want a denial, got %v", err)
	return le.RetryAfter
}

// TestMonthlyQuotaResetsOnTheFirstInParis: 10,000 calls of a key in
// February 2028 (a leap year), the next denied a µs before midnight of
// March 1st in Paris until then, and admitted at midnight; another key
// has its own quota.
func TestMonthlyQuotaResetsOnTheFirstInParis(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	first := time.Date(2028, 3, 1, 0, 0, 0, 0, paris)
	each(t, func(t *testing.T, q *QuotasWithRateLimit, clock *clocktest.Manual) {
		clock.Set(time.Date(2028, 2, 1, 0, 0, 0, 0, paris))
		for range 10000 {
			require.NoError(t, q.Monthly(ctx, "acme"))
		}
		clock.Set(first.Add(-time.Microsecond))
		assert.Equal(t, time.Microsecond, retryAfter(t, q.Monthly(ctx, "acme")))
		require.NoError(t, q.Monthly(ctx, "initech"))
		clock.Set(first)
		require.NoError(t, q.Monthly(ctx, "acme"))
	})
}

// TestDailyWeeklyYearly: each resets at its next midnight in its zone.
func TestDailyWeeklyYearly(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	each(t, func(t *testing.T, q *QuotasWithRateLimit, clock *clocktest.Manual) {
		// Daily (UTC): 3, at most 2 a second.
		clock.Set(time.Date(2028, 12, 31, 23, 59, 58, 0, time.UTC))
		require.NoError(t, q.Daily(ctx))
		require.NoError(t, q.Daily(ctx))
		assert.Equal(t, time.Second, retryAfter(t, q.Daily(ctx)), "the second's limit")
		clock.Advance(time.Second)
		require.NoError(t, q.Daily(ctx))
		assert.Equal(t, time.Second, retryAfter(t, q.Daily(ctx)), "the day's limit, until 2029")
		clock.Advance(time.Second)
		require.NoError(t, q.Daily(ctx))

		// Weekly (New York): from Sunday 2028-03-12, the day DST starts,
		// to Monday.
		clock.Set(time.Date(2028, 3, 12, 12, 0, 0, 0, ny))
		for range 5 {
			require.NoError(t, q.Weekly(ctx))
		}
		monday := time.Date(2028, 3, 13, 0, 0, 0, 0, ny)
		assert.Equal(t, monday.Sub(clock.Now()), retryAfter(t, q.Weekly(ctx)))
		clock.Set(monday)
		require.NoError(t, q.Weekly(ctx))

		// Yearly (Tokyo): New Year's Day there is 15:00 UTC on Dec 31.
		clock.Set(time.Date(2028, 12, 31, 14, 0, 0, 0, time.UTC))
		require.NoError(t, q.Yearly(ctx))
		require.NoError(t, q.Yearly(ctx))
		assert.Equal(t, time.Hour, retryAfter(t, q.Yearly(ctx)))
		clock.Set(time.Date(2029, 1, 1, 0, 0, 0, 0, tokyo))
		require.NoError(t, q.Yearly(ctx))
	})
}

// TestRulesShowTheirCalendar: the rules read as their directives.
func TestRulesShowTheirCalendar(t *testing.T) {
	var got []string
	for _, r := range RateLimitRules() {
		for _, l := range r.Limits {
			got = append(got, l.String())
		}
	}
	assert.Equal(t, []string{
		"3/day (fixed_window)", "2/1s (sliding_log)",
		"10000/month Europe/Paris (fixed_window)",
		"1000/month Europe/Paris (fixed_window)",
		"5/week America/New_York (fixed_window)",
		"2/year Asia/Tokyo (fixed_window)",
	}, got)
}

// TestMonthlyTokensSettle: a monthly token quota reserves a call's
// maxTokens and settles at what it used: the rest goes back to the month
// the call was reserved in while it lasts; a call reserved in February
// and done in March gives February nothing back, and a debt counts in
// March.
func TestMonthlyTokensSettle(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	first := time.Date(2028, 3, 1, 0, 0, 0, 0, paris)
	var m *model
	next := func(clock *clocktest.Manual) Quotas {
		m = &model{clock: clock}
		return m
	}
	eachWith(t, next, func(t *testing.T, q *QuotasWithRateLimit, clock *clocktest.Manual) {
		clock.Set(first.Add(-time.Hour))
		m.used, m.took = 100, time.Second
		_, err := q.Tokens(ctx, "acme", 600)
		require.NoError(t, err)
		m.used = 900
		_, err = q.Tokens(ctx, "acme", 900) // 500 came back
		require.NoError(t, err)
		_, err = q.Tokens(ctx, "acme", 1)
		assert.Equal(t, first.Sub(clock.Now()), retryAfter(t, err), "February spent")

		// Reserved in February, done in March: March is whole.
		clock.Set(first.Add(-time.Second))
		m.used, m.took = 10, 2*time.Second
		_, err = q.Tokens(ctx, "initech", 1000)
		require.NoError(t, err)
		m.used, m.took = 1000, 0
		_, err = q.Tokens(ctx, "initech", 1000)
		require.NoError(t, err, "March's 1000 whole")

		// A debt settled in March counts there: 500 used of 10 reserved.
		clock.Set(first.Add(-time.Second))
		m.used, m.took = 500, 2*time.Second
		_, err = q.Tokens(ctx, "umbrella", 10)
		require.NoError(t, err)
		m.used, m.took = 0, 0
		_, err = q.Tokens(ctx, "umbrella", 511)
		assert.Equal(t, first.AddDate(0, 1, 0).Sub(clock.Now()), retryAfter(t, err), "490 of March's 1000 owed")
		_, err = q.Tokens(ctx, "umbrella", 510)
		require.NoError(t, err)
	})
}
