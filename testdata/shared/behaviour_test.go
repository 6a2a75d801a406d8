package shared

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/clocktest"
	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type api struct{}

func (api) Search(context.Context, string, string, string) ([]string, error) { return nil, nil }
func (api) Export(context.Context, string, string) error                     { return nil }
func (api) Health(context.Context) error                                     { return nil }

type billing struct{}

func (billing) Charge(context.Context, string, int64) error { return nil }

var ctx = context.Background()

// deniedBy returns the key expression of the line that denied err's call,
// failing when err is no denial.
func deniedBy(t *testing.T, err error) string {
	t.Helper()
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	return le.KeyExpr
}

// TestAbusiveKeySpendsNoSharedLine is issue 29's first finding: with the
// global line checked apart from the per-key line, one abusive key's
// denials spent the global budget and an unrelated key got 429s. Decided
// together, a call its own line denies charges no shared line.
func TestAbusiveKeySpendsNoSharedLine(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		a := NewAPIWithRateLimit(api{}, limiter)
		admitted := 0
		for range 200 {
			if _, err := a.Search(ctx, "acme", "abuser-key", "q"); err == nil {
				admitted++
			} else {
				require.Equal(t, "apiKey", deniedBy(t, err), "the abuser's own line denies it")
			}
		}
		require.Equal(t, 5, admitted, "the abuser's own line admits 5 a second")
		// 15 units of the global line are left, for another tenant's key.
		for i := range 15 {
			_, err := a.Search(ctx, "globex", fmt.Sprintf("key-%d", i/5), "q")
			require.NoError(t, err, "call %d of an unrelated key", i)
		}
		_, err := a.Search(ctx, "initech", "fresh", "q")
		require.Equal(t, "", deniedBy(t, err), "the global line is spent: 20 calls a second in all")
	})
}

// TestGlobalLineSharedByMethodsAndTypes: the global line is one budget of
// 20 units a second that Search (1 unit), Export (3 units, its cost= on
// every line) and Billing.Charge (which takes the line with shared=
// alone) all spend; none of them has a global line of its own.
func TestGlobalLineSharedByMethodsAndTypes(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		a := NewAPIWithRateLimit(api{}, limiter)
		b := NewBillingWithRateLimit(billing{}, limiter)
		units := 0
		// Each call by its own key and tenant: only the global line is common.
		for i := range 30 {
			key, tenant := fmt.Sprintf("k%d", i), fmt.Sprintf("t%d", i)
			var err error
			cost := 1
			switch i % 3 {
			case 0:
				_, err = a.Search(ctx, tenant, key, "q")
			case 1:
				err, cost = a.Export(ctx, tenant, key), 3
			case 2:
				err = b.Charge(ctx, tenant, 100)
			}
			if err == nil {
				units += cost
				continue
			}
			require.Equal(t, "", deniedBy(t, err), "call %d: only the global line may deny it", i)
		}
		require.LessOrEqual(t, units, 20, "the global line admitted more than its 20 units")
		require.GreaterOrEqual(t, units, 18, "the global line admitted %d units, less than its 20 minus one Export", units)
		require.Error(t, b.Charge(ctx, "t-last", 1), "a call on the spent global line")
		// The line's state is its name's: Reset of that name lifts it.
		reset := ratelimit.Op{Kind: ratelimit.OpReset, Request: ratelimit.Request{Name: "github.com/ratelimitgen/ratelimitgen/testdata/shared#global"}}
		_, err := limiter.Do(ctx, reset)
		require.NoError(t, err)
		require.NoError(t, b.Charge(ctx, "t-last", 1), "a call once the global line is reset")
	})
}

// TestTenantQuotaSharedByMethods: a tenant's monthly quota of 50 units is
// spent by every method of API, under any API key of the tenant, and
// then denies the tenant (its key expression, tenant, says which line),
// not another tenant; the clock moves a second after every 4 calls, so
// neither the global line nor the per-key lines deny.
func TestTenantQuotaSharedByMethods(t *testing.T) {
	onClock(t, func(t *testing.T, clock *clocktest.Manual, limiter ratelimit.Limiter) {
		a := NewAPIWithRateLimit(api{}, limiter)
		units := 0
		for i := 0; ; i++ {
			if i%4 == 0 {
				clock.Advance(time.Second)
			}
			key := fmt.Sprintf("k%d", i%3)
			var err error
			cost := 1
			if i%2 == 0 {
				_, err = a.Search(ctx, "acme", key, "q")
			} else {
				err, cost = a.Export(ctx, "acme", key), 3
			}
			if err != nil {
				require.Equal(t, "tenant", deniedBy(t, err), "call %d", i)
				break
			}
			units += cost
			require.Less(t, i, 60, "the quota never denied")
		}
		require.LessOrEqual(t, units, 50)
		require.GreaterOrEqual(t, units, 48, "the quota of 50 units denied at %d", units)
		_, err := a.Search(ctx, "globex", "k0", "q")
		require.NoError(t, err, "another tenant's quota is its own")
	})
}

// onClock runs f on each backend with a clock the test moves.
func onClock(t *testing.T, f func(t *testing.T, clock *clocktest.Manual, limiter ratelimit.Limiter)) {
	t.Run("memory", func(t *testing.T) {
		clock := clocktest.NewManual()
		f(t, clock, ratelimit.NewMemory(ratelimit.WithClock(clock)))
	})
	t.Run("redis", func(t *testing.T) {
		srv.Flush(t)
		client := srv.Client()
		t.Cleanup(func() { client.Close() })
		clock := clocktest.NewManual()
		f(t, clock, redislimit.New(client, ratelimit.WithClock(clock)))
	})
}

// TestSharedLineNeedsALineSharer: a limiter that cannot keep a line's
// state apart from its rule's refuses the call rather than keep one
// global line per method.
func TestSharedLineNeedsALineSharer(t *testing.T) {
	a := NewAPIWithRateLimit(api{}, allowOnly{ratelimit.NewMemory()})
	_, err := a.Search(ctx, "acme", "k", "q")
	require.ErrorIs(t, err, ratelimit.ErrInvalidLimit)
	require.False(t, errors.Is(err, ratelimit.ErrLimited))
}

// allowOnly offers Allow alone.
type allowOnly struct{ m *ratelimit.MemoryLimiter }

func (l allowOnly) Allow(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	return l.m.Allow(ctx, req)
}

func (l allowOnly) Do(_ context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.Unsupported(l, op.Kind)
}

func (allowOnly) Abilities() ratelimit.Abilities { return ratelimit.Abilities{} }

// auth fails the logins whose password is not "right", and the rotations
// of user "bad"; Login holds each call until gate, when set, is closed.
type auth struct {
	gate    chan struct{}
	entered atomic.Int64
}

func (a *auth) Login(_ context.Context, _, password string) error {
	a.entered.Add(1)
	if a.gate != nil {
		<-a.gate
	}
	if password != "right" {
		return errors.New("wrong password")
	}
	return nil
}

func (a *auth) Rotate(_ context.Context, user string) error {
	if user == "bad" {
		return errors.New("rotation failed")
	}
	return nil
}

// TestLoginsCountFailuresOnASharedLine: 30 logins at once succeed, none
// denying another, and spend neither line; failures spend both, all or
// nothing: 3 failures fill ann's own line, 2 of bob fill the shared line
// of 5, which then denies carl before his own line.
func TestLoginsCountFailuresOnASharedLine(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		impl := &auth{gate: make(chan struct{})}
		a := NewAuthWithRateLimit(impl, limiter)
		errs := make(chan error, 30)
		for i := range 30 {
			go func() { errs <- a.Login(ctx, fmt.Sprintf("u%d", i%3), "right") }()
		}
		for impl.entered.Load() < 30 {
			select {
			case err := <-errs:
				t.Fatalf("a login returned before the gate opened: %v", err)
			case <-time.After(time.Millisecond):
			}
		}
		close(impl.gate)
		for range 30 {
			require.NoError(t, <-errs)
		}
		impl.gate = nil
		for range 3 {
			require.EqualError(t, a.Login(ctx, "ann", "guess"), "wrong password")
		}
		require.Equal(t, "user", deniedBy(t, a.Login(ctx, "ann", "right")), "ann's 3 failures")
		for range 2 {
			require.EqualError(t, a.Login(ctx, "bob", "guess"), "wrong password")
		}
		require.Equal(t, "", deniedBy(t, a.Login(ctx, "carl", "right")), "5 failures in all")
	})
}

// TestFailedRotationsAreGivenBackOnEveryLine: a rotation that fails is
// given back on its own line and the shared one: 5 failures leave both
// as they were, and 2 rotations of a user then spend his line.
func TestFailedRotationsAreGivenBackOnEveryLine(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		a := NewAuthWithRateLimit(&auth{}, limiter)
		for range 5 {
			require.EqualError(t, a.Rotate(ctx, "bad"), "rotation failed")
		}
		for _, user := range []string{"ann", "ann", "bob", "bob", "carl"} {
			require.NoError(t, a.Rotate(ctx, user), "%s's rotation", user)
		}
		require.Equal(t, "user", deniedBy(t, a.Rotate(ctx, "ann")), "ann's 2 rotations")
		require.Equal(t, "", deniedBy(t, a.Rotate(ctx, "dave")), "5 rotations in all")
	})
}
