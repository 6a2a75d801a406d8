package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// concurrencyLimit is a concurrency limit of slots calls in flight.
func concurrencyLimit(slots int64, lease time.Duration) ratelimit.Limit {
	return ratelimit.Limit{Algorithm: "concurrency", Threshold: slots, Period: lease}
}

// TestSlotsBackendsAgree feeds the same random sequence of slot
// reservations (alone and with rate limits), releases, renewals and clock
// steps past leases to both backends on a pinned clock, and requires
// identical decisions.
func TestSlotsBackendsAgree(t *testing.T) {
	rates := [][]ratelimit.Limit{
		nil,
		{{Period: time.Second, Threshold: 5}},
		{{Algorithm: ratelimit.TokenBucket, Period: 100 * time.Millisecond, Threshold: 4}, {Algorithm: ratelimit.FixedWindow, Period: time.Second, Threshold: 6}},
		{{Calendar: "day", TZ: "Europe/Paris", Threshold: 8}},
	}
	for i, limits := range rates {
		t.Run(fmt.Sprint("rates", i), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			red := newTestRedis(t, ratelimit.WithClock(clock))
			backends := []slotHolder{mem, red}
			slot := concurrencyLimit(3, 50*time.Millisecond)
			type held struct {
				req   ratelimit.Request
				token string
			}
			var open []held
			admitted, denied, peeks := 0, 0, 0
			for n := range 400 {
				switch op := rng.IntN(10); {
				case op < 2:
					clock.Advance(time.Duration(rng.IntN(30_000)) * time.Microsecond)
				case op < 4 && len(open) > 0:
					j := rng.IntN(len(open))
					h := open[j]
					open = append(open[:j], open[j+1:]...)
					for _, b := range backends {
						require.NoError(t, b.ReleaseSlot(ctx, h.req, slot, h.token))
					}
				case op < 5 && len(open) > 0:
					h := open[rng.IntN(len(open))]
					var got []bool
					for _, b := range backends {
						ok, err := b.RenewSlot(ctx, h.req, slot, h.token)
						require.NoError(t, err)
						got = append(got, ok)
					}
					require.Equal(t, got[0], got[1], "renewal %d", n)
				case op < 6:
					req := ratelimit.Request{Name: "slots", Key: fmt.Sprint("k", rng.IntN(2)), Cost: rng.Int64N(3), Limits: limits}
					dm, hm, err := mem.PeekSlot(ctx, req, slot)
					require.NoError(t, err)
					dr, hr, err := red.PeekSlot(ctx, req, slot)
					require.NoError(t, err)
					require.Equal(t, dm, dr, "peek %d: %+v", n, req)
					require.Equal(t, hm, hr, "peek %d: slots held", n)
					all := req
					all.Limits = append([]ratelimit.Limit{slot}, limits...)
					pm, err := ratelimit.Peek(ctx, mem, all)
					require.NoError(t, err)
					pr, err := red.Peek(ctx, all)
					require.NoError(t, err)
					require.Equal(t, pm, pr, "peek %d: %+v", n, all)
					require.Equal(t, dm.Allowed, pm.Allowed)
					peeks++
				default:
					req := ratelimit.Request{Name: "slots", Key: fmt.Sprint("k", rng.IntN(2)), Cost: rng.Int64N(3), Limits: limits}
					token := fmt.Sprint("t", n)
					dm, am, err := mem.ReserveSlot(ctx, req, slot, token)
					require.NoError(t, err)
					dr, ar, err := red.ReserveSlot(ctx, req, slot, token)
					require.NoError(t, err)
					require.Equal(t, dm, dr, "call %d: %+v", n, req)
					if dm.Allowed {
						require.Equal(t, am, ar)
						open = append(open, held{req, token})
						admitted++
					} else {
						denied++
					}
				}
			}
			require.NotZero(t, admitted)
			require.NotZero(t, denied)
			require.NotZero(t, peeks)
		})
	}
}

// TestSlotsOnACluster takes, peeks at, resets and gives back slots with
// rate limits on a Redis Cluster: every key of a call is in one slot of
// the cluster.
func TestSlotsOnACluster(t *testing.T) {
	ctx := context.Background()
	cluster, err := redistest.StartCluster(3)
	require.NoError(t, err)
	t.Cleanup(cluster.Stop)
	c := cluster.Client()
	t.Cleanup(func() { c.Close() })
	l := newTest(c, WithDenyCache(0), withoutHeartbeat())
	r := &ratelimit.Rule{Name: "cluster-slots", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 10}, concurrencyLimit(2, time.Minute)}}
	for i := range 20 {
		key := fmt.Sprint("tenant", i)
		a, err := r.Reserve(ctx, l, 1, key)
		require.NoError(t, err)
		b, err := r.Reserve(ctx, l, 1, key)
		require.NoError(t, err)
		_, err = r.Reserve(ctx, l, 1, key)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		d, err := r.Peek(ctx, l, key)
		require.NoError(t, err)
		require.False(t, d.Allowed, "a peek sees the slots full")
		require.Equal(t, 1, d.LimitIndex)
		if i%2 == 1 {
			// A reset frees the slots (one UNLINK of keys of one slot of
			// the cluster); the calls holding them give back nothing.
			require.NoError(t, l.Reset(ctx, r.Name, key))
			d, err = r.Peek(ctx, l, key)
			require.NoError(t, err)
			require.Equal(t, ratelimit.Decision{Allowed: true, Remaining: 2, LimitIndex: 1}, d)
		}
		require.NoError(t, a.Settle(ctx, 3))
		require.NoError(t, b.Release(ctx))
		c, err := r.Reserve(ctx, l, 1, key)
		require.NoError(t, err)
		require.NoError(t, c.Release(ctx))
	}
}

// TestSlotScriptsRenderAsGolden compares the slot scripts, the cooldown
// scripts and the queue's count of places with their text under testdata/scripts (rewritten with
// -update).
func TestSlotScriptsRenderAsGolden(t *testing.T) {
	for name, text := range map[string]string{"reserve_slot": reserveSlotText, "renew_slot": renewSlotText, "cool": coolText, "cooling": coolingText, "waiting": waitingText} {
		matchesGolden(t, name, text)
	}
}

// slotHolder is what the slot tests call of the memory limiter and the
// Redis limiter alike: the methods behind the slot operations.
type slotHolder interface {
	ReserveSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (ratelimit.Decision, time.Time, error)
	ReleaseSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) error
	RenewSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit, token string) (bool, error)
	PeekSlot(ctx context.Context, req ratelimit.Request, slot ratelimit.Limit) (ratelimit.Decision, int64, error)
}
