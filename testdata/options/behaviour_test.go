package options

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/limitmetrics"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type jobs struct{ submitted, steady int }

func (j *jobs) Submit(_ context.Context, _ Region, n int) error {
	j.submitted += n
	return nil
}
func (*jobs) Batch(context.Context, int64) error      { return nil }
func (*jobs) Route(uint64, uint16) error              { return nil }
func (*jobs) Spread(Shard) error                      { return nil }
func (*jobs) Smooth(context.Context) error            { return nil }
func (*jobs) Queue(context.Context) error             { return nil }
func (*jobs) Observe(context.Context) error           { return nil }
func (*jobs) Nanos() error                            { return nil }
func (*jobs) Hot(context.Context, string) error       { return nil }
func (*jobs) HotSecond(context.Context, string) error { return nil }

func (j *jobs) Steady(context.Context, string) error {
	j.steady++
	return nil
}

func (*jobs) Charge(_ context.Context, acct *Account) (struct{ Cents int64 }, error) {
	return struct{ Cents int64 }{int64(acct.Owner().ID) * 100}, nil
}

func TestKeyThroughAMethod(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		d := NewJobsWithRateLimit(&jobs{}, limiter)
		ctx := context.Background()
		got, err := d.Charge(ctx, &Account{owner: &Owner{ID: 3}})
		require.NoError(t, err)
		require.Equal(t, int64(300), got.Cents)
		got, err = d.Charge(ctx, &Account{owner: &Owner{ID: 3}})
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "3", le.Key)
		require.Zero(t, got)
		_, err = d.Charge(ctx, &Account{})
		require.ErrorIs(t, err, ratelimit.ErrNilKey)
		require.ErrorContains(t, err, "acct.Owner() is nil")
		_, err = d.Charge(ctx, nil)
		require.ErrorContains(t, err, "acct is nil")
	})
}

func TestCostsAndKeys(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		j := &jobs{}
		d := NewJobsWithRateLimit(j, limiter)
		ctx := context.Background()

		require.NoError(t, d.Submit(ctx, "eu", 60))
		require.NoError(t, d.Submit(ctx, "eu", 40))
		err := d.Submit(ctx, "eu", 1)
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le, "a cost parameter spends units")
		require.Equal(t, "eu", le.Key)
		require.NoError(t, d.Submit(ctx, "us", 100))
		require.Equal(t, 200, j.submitted)

		require.NoError(t, d.Batch(ctx, -7))
		require.NoError(t, d.Batch(ctx, -7))
		require.ErrorAs(t, d.Batch(ctx, -7), &le, "a static cost of 4 admits two calls of 10")
		require.Equal(t, "-7", le.Key)

		require.NoError(t, d.Route(1<<63, 50))
		require.ErrorAs(t, d.Route(1<<63, 1), &le)
		require.Equal(t, "9223372036854775808", le.Key)

		for range 5 {
			require.NoError(t, d.Spread(200))
		}
		require.ErrorAs(t, d.Spread(200), &le)
		require.Equal(t, "200", le.Key)
	})
}

// TestLocalFallbackKeepsTheLimit runs onerror=local on a Redis limiter
// while its server is down: each user gets exactly the threshold, decided
// in process, and Redis decides again once a server answers there.
func TestLocalFallbackKeepsTheLimit(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	addr := s.Addr
	s.Stop()
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	metrics := &limitmetrics.Metrics{}
	j := &jobs{}
	d := NewJobsWithRateLimit(j, redislimit.New(client, ratelimit.WithHook(metrics)))
	ctx := context.Background()
	for _, user := range []string{"alice", "bob"} {
		for i := range 5 {
			err := d.Steady(ctx, user)
			if i < 3 {
				require.NoError(t, err, "%s call %d", user, i)
			} else {
				require.ErrorIs(t, err, ratelimit.ErrLimited, "%s call %d", user, i)
			}
		}
	}
	require.Equal(t, 6, j.steady)
	name := jobsSteadyRateLimit.Name
	require.Equal(t, uint64(10), metrics.Snapshot()[name].Fallback)

	s, err = redistest.StartOn(addr)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	// A new user each time: the fallback's admissions of a user are
	// carried back to Redis when it returns, so a user polled through the
	// outage may already have used the limit there.
	polls := 0
	require.Eventually(t, func() bool {
		polls++
		before := metrics.Snapshot()[name]
		err := d.Steady(ctx, fmt.Sprintf("carol-%d", polls))
		after := metrics.Snapshot()[name]
		return err == nil && after.Fallback == before.Fallback && after.Allowed == before.Allowed+1
	}, 30*time.Second, 10*time.Millisecond, "Redis never decided again")
}

func TestLocalWhileTheLimiterDecides(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		d := NewJobsWithRateLimit(&jobs{}, limiter)
		for range 3 {
			require.NoError(t, d.Steady(context.Background(), "dan"))
		}
		require.ErrorIs(t, d.Steady(context.Background(), "dan"), ratelimit.ErrLimited)
	})
}

// TestHotLeasesBesideAUserLine calls Hot, whose every-call line is leased,
// and HotSecond, whose every-call line is leased after the user's line,
// from many users: each user's line still admits exactly its 10 a minute
// (all or nothing: its denials take nothing from the lease), and on Redis
// the leased line's calls come from leases.
func TestHotLeasesBesideAUserLine(t *testing.T) {
	for _, method := range []string{"Hot", "HotSecond"} {
		backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
			d := NewJobsWithRateLimit(&jobs{}, limiter)
			ctx := context.Background()
			call := d.Hot
			if method == "HotSecond" {
				call = d.HotSecond
			}
			for u := range 20 {
				user := fmt.Sprint("user", u)
				for range 10 {
					require.NoError(t, call(ctx, user), method)
				}
				var le *ratelimit.LimitError
				require.ErrorAs(t, call(ctx, user), &le, "%s: the user's line denies the 11th call", method)
				require.Equal(t, int64(10), le.Limit.Threshold)
			}
			if r, ok := limiter.(*redislimit.Limiter); ok {
				leases, served := r.Leases().Stats()
				require.Positive(t, leases, method)
				require.Positive(t, served, "%s: calls admitted from leases", method)
			}
		})
	}
}
