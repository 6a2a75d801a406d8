package redislimit

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// lossyDialer dials a real server, and can refuse to dial, or lose the
// replies of the connections it dialled: while lose is set, a read waits
// for the server's reply and fails as a read that timed out does, so the
// server ran the command and the client does not know.
type lossyDialer struct {
	refuse, lose atomic.Bool
}

func (d *lossyDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.refuse.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lossyConn{Conn: c, d: d}, nil
}

type lossyConn struct {
	net.Conn
	d *lossyDialer
}

func (c *lossyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err == nil && c.d.lose.Load() {
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	return n, err
}

// TestCarryBackIsNeverChargedTwice: the fallback's admissions are carried
// back exactly once. A carry-back that cannot dial keeps them for the
// next; one whose replies are lost (Redis ran the scripts) drops them,
// since sending them again would charge them twice.
func TestCarryBackIsNeverChargedTwice(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			s, err := redistest.Start()
			require.NoError(t, err)
			t.Cleanup(s.Stop)
			d := &lossyDialer{}
			client := redis.NewClient(ClientOptions(&redis.Options{Addr: s.Addr, Dialer: d.dial, ReadTimeout: time.Second}))
			t.Cleanup(func() { client.Close() })
			l := New(client, WithBreaker(0, 0, 0), WithFallbackProcesses(1))
			defer l.Close()
			ctx := t.Context()
			req := ratelimit.Request{Name: "lossy", Key: "k", Limits: []ratelimit.Limit{{Period: 24 * time.Hour, Threshold: 1000, Algorithm: alg}}}
			const admitted = 40 // more than guard.MaxCarriedPerCall: some are merged
			for range admitted {
				dec, _, err := l.AllowLocal(ctx, req)
				require.NoError(t, err)
				require.True(t, dec.Allowed)
			}

			d.refuse.Store(true)
			l.fallback.CarryBack(ctx)
			assert.Zero(t, charged(l)+dropped(l), "nothing was sent")
			require.Equal(t, guard.MaxCarriedPerCall, l.fallback.Held(), "what could not be sent is kept")

			d.refuse.Store(false)
			require.NoError(t, client.Ping(ctx).Err())
			require.NoError(t, decideScript.Load(ctx, client).Err(), "a NOSCRIPT reply would be lost too")
			require.NoError(t, logScript.Load(ctx, client).Err())
			d.lose.Store(true)
			l.fallback.CarryBack(ctx)
			d.lose.Store(false)
			assert.EqualValues(t, admitted, dropped(l), "the charges whose replies were lost are dropped")
			assert.Zero(t, l.fallback.Held(), "and not kept to be sent again")
			l.fallback.CarryBack(ctx)

			p, err := l.Peek(ctx, req)
			require.NoError(t, err)
			assert.EqualValues(t, admitted, req.Limits[0].Threshold-p.Remaining, "Redis charged each admission once")
		})
	}
}

// TestCarryBackCountsCalls: beyond guard.MaxCarriedPerCall admissions of
// one call, those of a rule with a limit that counts calls are not merged
// (a merged admission would take 1 call of that limit for several), so
// the carry-back charges every call to it, and their units to the other.
func TestCarryBackCountsCalls(t *testing.T) {
	s, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	client := redis.NewClient(ClientOptions(&redis.Options{Addr: s.Addr}))
	t.Cleanup(func() { client.Close() })
	l := New(client, WithBreaker(0, 0, 0), WithFallbackProcesses(1))
	defer l.Close()
	ctx := t.Context()
	req := ratelimit.Request{Name: "calls", Key: "k", Cost: 3, Limits: []ratelimit.Limit{
		{Period: 24 * time.Hour, Threshold: 1000, PerCall: true},
		{Period: 24 * time.Hour, Threshold: 100000},
	}}
	const admitted = 2 * guard.MaxCarriedPerCall
	for range admitted {
		dec, _, err := l.AllowLocal(ctx, req)
		require.NoError(t, err)
		require.True(t, dec.Allowed)
	}
	require.Equal(t, admitted, l.fallback.Held(), "every admission is kept apart")
	l.fallback.CarryBack(ctx)
	assert.EqualValues(t, admitted*req.Cost, charged(l))
	p, err := l.Peek(ctx, ratelimit.Request{Name: req.Name, Key: req.Key, Cost: 1, Limits: req.Limits})
	require.NoError(t, err)
	assert.EqualValues(t, admitted, req.Limits[0].Threshold-p.Remaining, "the limit that counts calls was charged each call")
}

// TestCarryScriptRendersAsGolden compares the carry-back scripts with
// their texts under testdata/scripts (rewritten with -update); the carry
// tests run them.
func TestCarryScriptRendersAsGolden(t *testing.T) {
	for name, text := range map[string]string{"carry_previous": previousText, "carry_log": logText} {
		matchesGolden(t, name, text)
	}
}

// charged returns the units l's fallback carried back to Redis.
func charged(l *Limiter) int64 {
	c, _ := l.fallback.Carried()
	return c
}

// dropped returns the units l's fallback admitted but did not carry back.
func dropped(l *Limiter) int64 {
	_, d := l.fallback.Carried()
	return d
}

// TestCarryBackChargesWhatDoesNotFit: admissions carried back out of
// order (another process's, later, first) may not fit their windows at
// their own times; they were admitted all the same, so they are charged on
// top, never dropped, and Redis denies until the window drains.
func TestCarryBackChargesWhatDoesNotFit(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingLog, ratelimit.FixedWindow, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			l := newTestRedis(t, WithFallbackProcesses(1))
			ctx := t.Context()
			limits := []ratelimit.Limit{{Period: time.Hour, Threshold: 10, Algorithm: alg}}
			req := ratelimit.Request{Name: "overfull", Key: "k", Limits: limits}
			now := time.Now()
			later := req
			later.Cost = 8
			first := req
			first.Cost = 6
			res := guarded{l.redisBackend}.Carry(ctx, []guard.Admission{{Req: later, At: now.Add(-time.Millisecond)}})
			require.EqualValues(t, 8, res.Charged)
			res = guarded{l.redisBackend}.Carry(ctx, []guard.Admission{{Req: first, At: now.Add(-2 * time.Millisecond)}})
			assert.EqualValues(t, 6, res.Charged, "charged on top though it does not fit")
			assert.Zero(t, res.Dropped)
			d, err := l.Peek(ctx, req)
			require.NoError(t, err)
			assert.False(t, d.Allowed, "the window is over-full: Redis denies")
		})
	}
}
