package cooldown

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// provider answers with err, counting its calls.
type provider struct {
	err   error
	calls int
}

func (p *provider) Ping(context.Context) error { p.calls++; return p.err }

func (p *provider) Ask(context.Context, *Request) (*Answer, error) {
	p.calls++
	return &Answer{Used: 1}, p.err
}

func (p *provider) Complete(_ context.Context, req *Request) (*Answer, error) {
	p.calls++
	if p.err != nil {
		return nil, p.err
	}
	return &Answer{Used: 1}, nil
}

// cooled requires err to be a cooldown's denial of about after.
func cooled(t *testing.T, err error, after time.Duration) {
	t.Helper()
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	require.LessOrEqual(t, le.RetryAfter, after)
	require.Greater(t, le.RetryAfter, after-time.Second)
}

func TestAProviders429CoolsTheOrgWideLineForEveryTenant(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		p := &provider{err: fmt.Errorf("ask: %w", &BusyError{After: 30 * time.Second})}
		d := NewProviderWithRateLimit(p, limiter)
		_, err := d.Ask(ctx, &Request{Tenant: "ada"})
		require.ErrorAs(t, err, new(*BusyError))
		p.err = nil
		for _, tenant := range []string{"ada", "grace"} {
			_, err := d.Ask(ctx, &Request{Tenant: tenant})
			cooled(t, err, 30*time.Second)
		}
		require.Equal(t, 1, p.calls, "no call reached the provider while it cooled")
		// Another decorator's limiter (another process) sees the same
		// cooldown when it shares the state: here, the same limiter.
		other := NewProviderWithRateLimit(p, limiter)
		_, err = other.Ask(ctx, &Request{Tenant: "linus"})
		cooled(t, err, 30*time.Second)
	})
}

func TestAnErrorWithoutRetryCoolsNothing(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		p := &provider{err: errors.New("boom")}
		d := NewProviderWithRateLimit(p, limiter)
		require.Error(t, d.Ping(ctx))
		p.err = nil
		require.NoError(t, d.Ping(ctx))
		require.Equal(t, 2, p.calls)
	})
}

func TestACooledReservationTakesNothing(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		p := &provider{err: &BusyError{After: time.Minute}}
		d := NewProviderWithRateLimit(p, limiter)
		_, err := d.Complete(ctx, &Request{Tenant: "ada", Max: 100})
		require.ErrorAs(t, err, new(*BusyError))
		p.err = nil
		_, err = d.Complete(ctx, &Request{Tenant: "ada", Max: 100})
		cooled(t, err, time.Minute)
		_, err = d.Complete(ctx, &Request{Tenant: "grace", Max: 100})
		require.NoError(t, err, "another tenant's line does not cool")
		// ada's one reservation stands (a 429 is no refund here): 900 left.
		dec, err := providerCompleteRateLimit.Peek(ctx, limiter, "ada")
		require.NoError(t, err)
		require.Equal(t, ratelimit.SourceCooldown, dec.Source)
		require.Equal(t, 2, p.calls)
	})
}
