package settle

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// model uses the tokens it is told, or fails.
type model struct {
	tokens int
	usage  bool // whether it reports its usage
	err    error
}

func (m *model) Complete(_ context.Context, req *Request) (*Completion, error) {
	if m.err != nil {
		return nil, m.err
	}
	c := &Completion{Text: "ok"}
	if m.usage {
		c.Usage = &Usage{TotalTokens: m.tokens}
	}
	return c, nil
}

func (m *model) Chat(ctx context.Context, req *Request) (*Completion, error) {
	return m.Complete(ctx, req)
}

func (m *model) Login(context.Context, string, string) error { return m.err }

func (m *model) Probe(context.Context, string) error { return m.err }

func (m *model) Ask(ctx context.Context, req *Request) (*Completion, error) {
	return m.Complete(ctx, req)
}

func (m *model) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return make([][]float32, len(texts)), m.err
}

func (m *model) Count(context.Context) (int64, error) { return int64(m.tokens), m.err }

func TestSettleChargesWhatTheCallUsed(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		m := &model{tokens: 100, usage: true}
		d := NewModelWithRateLimit(m, limiter)
		alice := &Request{APIKey: "alice", MaxTokens: 500}
		// Each call reserves 500 tokens and settles at 100: six calls
		// find 500 to reserve, the seventh 400.
		for range 6 {
			_, err := d.Complete(ctx, alice)
			require.NoError(t, err)
		}
		_, err := d.Complete(ctx, alice)
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le, "6 × 100 tokens used")
		require.Equal(t, "alice", le.Key)
		require.Equal(t, int64(400), le.Remaining)

		// A debt: 1500 used of 1000 reserved, and bob is denied until it
		// is paid.
		m.tokens = 1500
		bob := &Request{APIKey: "bob", MaxTokens: 1000}
		_, err = d.Complete(ctx, bob)
		require.NoError(t, err)
		_, err = d.Complete(ctx, &Request{APIKey: "bob", MaxTokens: 1})
		require.ErrorAs(t, err, &le)
		require.Zero(t, le.Remaining)
	})
}

func TestAFailedCallStaysChargedAsReserved(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		m := &model{err: errors.New("upstream down")}
		d := NewModelWithRateLimit(m, limiter)
		_, err := d.Complete(ctx, &Request{APIKey: "carol", MaxTokens: 600})
		require.ErrorIs(t, err, m.err)
		m.err, m.usage, m.tokens = nil, true, 0
		_, err = d.Complete(ctx, &Request{APIKey: "carol", MaxTokens: 600})
		require.ErrorIs(t, err, ratelimit.ErrLimited, "600 still reserved")

		// A completion without usage cannot be settled: it stays reserved.
		m.usage = false
		_, err = d.Complete(ctx, &Request{APIKey: "dave", MaxTokens: 600})
		require.NoError(t, err)
		_, err = d.Complete(ctx, &Request{APIKey: "dave", MaxTokens: 600})
		require.ErrorIs(t, err, ratelimit.ErrLimited)
	})
}

func TestSettleAtALengthAndAFunction(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		m := &model{tokens: 40}
		d := NewModelWithRateLimit(m, limiter)
		// Count reserves 10 and settles at 40/2 = 20: five calls use 100.
		for range 5 {
			_, err := d.Count(ctx)
			require.NoError(t, err)
		}
		_, err := d.Count(ctx)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		// Embed reserves 1 and settles at one unit per text.
		_, err = d.Embed(ctx, make([]string, 60))
		require.NoError(t, err)
		_, err = d.Embed(ctx, make([]string, 40))
		require.NoError(t, err)
		_, err = d.Embed(ctx, nil)
		require.ErrorIs(t, err, ratelimit.ErrLimited, "100 tokens of the bucket used")
	})
}

func TestRequestsAndTokensInOneDecision(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		m := &model{tokens: 100, usage: true}
		d := NewModelWithRateLimit(m, limiter)
		// A call of 502 tokens takes 1 of the 3 requests and 502 of the
		// 1000 tokens, settled at 100.
		for range 3 {
			_, err := d.Chat(ctx, &Request{APIKey: "erin", MaxTokens: 502})
			require.NoError(t, err)
		}
		_, err := d.Chat(ctx, &Request{APIKey: "erin", MaxTokens: 1})
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le, "3 requests a minute")
		require.Equal(t, int64(3), le.Limit.Threshold)

		// The token line denies a call the request line admits, and the
		// denied call charges neither: frank keeps his 3 requests.
		_, err = d.Chat(ctx, &Request{APIKey: "frank", MaxTokens: 1000})
		require.NoError(t, err) // settled at 100: 900 left
		_, err = d.Chat(ctx, &Request{APIKey: "frank", MaxTokens: 901})
		require.ErrorAs(t, err, &le, "901 of 900 tokens")
		require.Equal(t, int64(1000), le.Limit.Threshold)
		require.Equal(t, int64(900), le.Remaining)
		for range 2 {
			_, err = d.Chat(ctx, &Request{APIKey: "frank", MaxTokens: 400})
			require.NoError(t, err, "the denied call took no request")
		}
		_, err = d.Chat(ctx, &Request{APIKey: "frank", MaxTokens: 1})
		require.ErrorAs(t, err, &le)
		require.Equal(t, int64(3), le.Limit.Threshold)
	})
}

func TestRefundSuccessCountsOnlyFailures(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		m := &model{}
		d := NewModelWithRateLimit(m, limiter)
		wrong := errors.New("wrong password")
		for range 10 {
			require.NoError(t, d.Login(ctx, "mallory", "right"), "successes are given back")
			require.NoError(t, d.Probe(ctx, "mallory"), "settled at 0")
		}
		m.err = wrong
		for range 3 {
			require.ErrorIs(t, d.Login(ctx, "mallory", "guess"), wrong)
		}
		require.ErrorIs(t, d.Login(ctx, "mallory", "guess"), ratelimit.ErrLimited, "3 failures")
		m.err = nil
		require.ErrorIs(t, d.Login(ctx, "mallory", "right"), ratelimit.ErrLimited, "a success is checked too")
		m.err = wrong
		for range 2 {
			require.ErrorIs(t, d.Probe(ctx, "mallory"), wrong)
		}
		require.ErrorIs(t, d.Probe(ctx, "mallory"), ratelimit.ErrLimited, "2 failures")
	})
}

// gatedLogins is a Login that holds each call until the gate opens, and
// counts the calls that reached it.
type gatedLogins struct {
	model
	gate    chan struct{}
	entered atomic.Int64
}

func (g *gatedLogins) Login(ctx context.Context, user, password string) error {
	g.entered.Add(1)
	<-g.gate
	return g.model.Login(ctx, user, password)
}

// TestConcurrentLoginsNeverDenyEachOther: 30 correct logins of one user
// at once, on a line of 3 failures per 15 minutes (refund=success), all
// reach the method together; the failures after them are counted from
// nothing, and the fourth is denied.
func TestConcurrentLoginsNeverDenyEachOther(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		g := &gatedLogins{gate: make(chan struct{})}
		d := NewModelWithRateLimit(g, limiter)
		errs := make(chan error, 30)
		for range 30 {
			go func() { errs <- d.Login(ctx, "ann", "right") }()
		}
		for g.entered.Load() < 30 {
			select {
			case err := <-errs:
				t.Fatalf("a login returned before the gate opened: %v", err)
			case <-time.After(time.Millisecond):
			}
		}
		close(g.gate)
		for range 30 {
			require.NoError(t, <-errs)
		}
		g.err = errors.New("wrong password")
		for range 3 {
			require.ErrorIs(t, d.Login(ctx, "ann", "guess"), g.err)
		}
		require.ErrorIs(t, d.Login(ctx, "ann", "guess"), ratelimit.ErrLimited, "3 failures, the successes counting none")
	})
}

func TestRefundOnARetryableErrorAndADenialFurtherIn(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		m := &model{tokens: 100, usage: true}
		d := NewModelWithRateLimit(m, limiter)
		req := &Request{APIKey: "grace", MaxTokens: 400}
		// Busy, and denied further in: given back, requests and tokens.
		m.err = errBusy
		for range 5 {
			_, err := d.Ask(ctx, req)
			require.ErrorIs(t, err, errBusy)
		}
		m.err = fmt.Errorf("inner decorator: %w", ratelimit.ErrLimited)
		for range 5 {
			_, err := d.Ask(ctx, req)
			require.ErrorIs(t, err, ratelimit.ErrLimited)
			_, err = d.Chat(ctx, req)
			require.ErrorIs(t, err, ratelimit.ErrLimited)
		}
		// Another error stands: 1 request and 400 tokens.
		m.err = errors.New("bad request")
		_, err := d.Ask(ctx, req)
		require.ErrorIs(t, err, m.err)
		m.err = nil
		_, err = d.Ask(ctx, req)
		require.NoError(t, err, "2 requests, 800 tokens")
		_, err = d.Ask(ctx, req)
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le, "1200 tokens")
		require.Equal(t, int64(1000), le.Limit.Threshold)
		// Chat's reservations denied further in were given back.
		for range 3 {
			_, err = d.Chat(ctx, &Request{APIKey: "grace", MaxTokens: 300})
			require.NoError(t, err)
		}
	})
}
