package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const concurrency = Algorithm("concurrency")

func TestConcurrencyHoldsAtMostItsSlots(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	m := NewMemory(WithClock(clock))
	r := &Rule{Name: "export", Limits: []Limit{{Algorithm: concurrency, Threshold: 2, Period: time.Minute}}}
	a, err := r.Reserve(ctx, m, 0, "tenant")
	require.NoError(t, err)
	b, err := r.Reserve(ctx, m, 0, "tenant")
	require.NoError(t, err)
	_, err = r.Reserve(ctx, m, 0, "tenant")
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, concurrency, le.Limit.Algorithm, "a concurrency denial says so")
	assert.Equal(t, time.Minute, le.RetryAfter, "the soonest lease's end")
	_, err = r.Reserve(ctx, m, 0, "other")
	require.NoError(t, err, "slots are per key")
	require.NoError(t, a.Release(ctx))
	require.NoError(t, a.Release(ctx), "a second release does nothing")
	c, err := r.Reserve(ctx, m, 0, "tenant")
	require.NoError(t, err, "a released slot is free")
	require.NoError(t, b.Settle(ctx, 1), "settle releases")
	require.NoError(t, c.Release(ctx))
}

func TestConcurrencySlotOfADeadCallFreesAfterItsLease(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	m := NewMemory(WithClock(clock))
	slot := Limit{Algorithm: concurrency, Threshold: 1, Period: time.Hour}
	r := &Rule{Name: "lease", Limits: []Limit{slot}}
	res, err := r.Reserve(ctx, m, 0, "k")
	require.NoError(t, err)
	res.slot.renew.Stop() // the process died: nobody renews
	clock.Advance(time.Hour - time.Microsecond)
	_, err = r.Reserve(ctx, m, 0, "k")
	require.ErrorIs(t, err, ErrLimited)
	clock.Advance(time.Microsecond)
	_, err = r.Reserve(ctx, m, 0, "k")
	require.NoError(t, err, "the lease ended")
}

func TestConcurrencyRenewsTheLeaseOfALongCall(t *testing.T) {
	ctx := context.Background()
	clock := newManualClock()
	m := NewMemory(WithClock(clock))
	lease := 30 * time.Millisecond
	r := &Rule{Name: "renew", Limits: []Limit{{Algorithm: concurrency, Threshold: 1, Period: lease}}}
	res, err := r.Reserve(ctx, m, 0, "k")
	require.NoError(t, err)
	end := func() int64 {
		m.slots.mu.Lock()
		defer m.slots.mu.Unlock()
		return m.slots.held[[2]string{"renew", "k"}][res.slot.token]
	}
	first := end()
	clock.Advance(lease / 2)
	// The renewal runs every third of a lease of real time: wait for one.
	require.Eventually(t, func() bool { return end() > first }, time.Minute, time.Millisecond)
	clock.Advance(lease / 2) // past the first lease's end
	_, err = r.Reserve(ctx, m, 0, "k")
	require.ErrorIs(t, err, ErrLimited, "the long call holds its slot past its first lease")
	require.NoError(t, res.Release(ctx))
	_, err = r.Reserve(ctx, m, 0, "k")
	require.NoError(t, err)
}

func TestConcurrencyAndRatesAreAllOrNothing(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(WithClock(newManualClock()))
	r := &Rule{Name: "both", Limits: []Limit{
		{Period: time.Hour, Threshold: 3},
		{Algorithm: concurrency, Threshold: 1},
	}}
	a, err := r.Reserve(ctx, m, 1, "k")
	require.NoError(t, err)
	_, err = r.Reserve(ctx, m, 1, "k")
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, concurrency, le.Limit.Algorithm)
	require.NoError(t, a.Release(ctx))
	// The denied call charged no rate: two more fit.
	for range 2 {
		res, err := r.Reserve(ctx, m, 1, "k")
		require.NoError(t, err)
		require.NoError(t, res.Release(ctx))
	}
	_, err = r.Reserve(ctx, m, 1, "k")
	require.ErrorAs(t, err, &le)
	assert.Equal(t, Algorithm(""), le.Limit.Algorithm, "the rate denies, and no slot is held")
	b, err := r.Reserve(ctx, m, 1, "other")
	require.NoError(t, err)
	require.NoError(t, b.Release(ctx))
	require.ErrorIs(t, r.Check(ctx, m, 1, "k"), ErrInvalidLimit, "a rule with a concurrency limit is reserved, not checked")
}

func TestConcurrencyNeverExceedsItsSlotsUnderLoad(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	r := &Rule{Name: "load", Limits: []Limit{{Algorithm: concurrency, Threshold: 5}}, Wait: time.Minute}
	var inFlight, most atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				res, err := r.Reserve(ctx, m, 0, "k")
				if !assert.NoError(t, err) {
					return
				}
				n := inFlight.Add(1)
				for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
				}
				time.Sleep(time.Millisecond / 4)
				inFlight.Add(-1)
				assert.NoError(t, res.Release(ctx))
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(5))
}

func TestConcurrencyDenialSaysSo(t *testing.T) {
	l := Limit{Algorithm: concurrency, Threshold: 10}
	assert.Equal(t, "10 in flight (concurrency, lease 30s)", l.String())
	e := &LimitError{Name: "export", Key: "acme", Limit: l, RetryAfter: 30 * time.Second}
	assert.Equal(t, `ratelimit: export key "acme" has 10 calls in flight, its most; retry after 30s at the latest`, e.Error())
}

// TestConcurrencyPeekAsReserveDecides peeks at a rule with a concurrency
// limit through overrides and keys per limit: overrides change its rate
// limits only, as Reserve's, and the slot and rate limits need one key.
func TestConcurrencyPeekAsReserveDecides(t *testing.T) {
	ctx := context.Background()
	ov := &StaticOverrides{}
	ov.SetKey("peek", "vip", Limit{Algorithm: Unlimited})
	ov.SetKey("peek", "banned", Limit{Algorithm: Block})
	ov.SetKey("peek", "small", Limit{Period: time.Hour, Threshold: 1})
	m := NewMemory(WithClock(newManualClock()), WithOverrides(ov))
	slot := Limit{Algorithm: concurrency, Threshold: 3, Period: time.Minute}
	r := &Rule{Name: "peek", Limits: []Limit{{Period: time.Hour, Threshold: 10}, slot}}

	for key, want := range map[string]Decision{
		"vip":    {Allowed: true, Remaining: 3, LimitIndex: 0},                                          // the slot alone
		"small":  {Allowed: true, Remaining: 1, ResetAfter: 0, LimitIndex: 0},                           // 0 left after the call, below 2 slots
		"anyone": {Allowed: true, Remaining: 3, LimitIndex: 1},                                          // the slot, the tightest
		"banned": {RetryAfter: time.Hour, ResetAfter: time.Hour, Source: SourceOverride, LimitIndex: 0}, // blocked
	} {
		d, err := r.Peek(ctx, m, key)
		require.NoError(t, err, key)
		assert.Equal(t, want, d, key)
	}
	res, err := r.Reserve(ctx, m, 1, "vip")
	require.NoError(t, err)
	d, err := r.Peek(ctx, m, "vip")
	require.NoError(t, err)
	assert.Equal(t, int64(2), d.Remaining, "an exempt key still holds slots")
	require.NoError(t, res.Release(ctx))

	req := Request{Name: "peek", Keys: []string{"k", "k"}, Limits: r.Limits}
	d, err = Peek(ctx, m, req)
	require.NoError(t, err)
	assert.Equal(t, int64(3), d.Remaining)
	req.Keys = []string{"k", "j"}
	_, err = Peek(ctx, m, req)
	require.ErrorIs(t, err, ErrInvalidLimit, "a slot and rate limits of different keys")
	_, err = Peek(ctx, m, Request{Name: "peek", Key: "k", Limits: []Limit{slot, slot}})
	require.ErrorIs(t, err, ErrInvalidLimit, "two concurrency limits")
	_, err = Peek(ctx, allowsOnly{next: m}, Request{Name: "peek", Key: "k", Limits: r.Limits})
	require.ErrorIs(t, err, errors.ErrUnsupported, "a limiter that holds no slots")
}

// TestConcurrencyWaitOutlastsTheLease: a call of concurrency=1 wait=5s
// (the default lease of 30 s, beyond the wait) made while another holds
// the slot waits for it, whatever the lease's end, and is admitted when
// the slot is given back; with nobody giving it back, it is denied for the
// slot once its wait is over, not before.
func TestConcurrencyWaitOutlastsTheLease(t *testing.T) {
	ctx := context.Background()
	var denials atomic.Int64
	m := NewMemory(WithClock(newManualClock()), WithHook(deniedHook{&denials}))
	r := &Rule{Name: "slot", Limits: []Limit{{Algorithm: concurrency, Threshold: 1}}, Wait: 5 * time.Second}
	holder, err := r.Reserve(ctx, m, 0, "tenant")
	require.NoError(t, err)
	type result struct {
		res *Reservation
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := r.Reserve(ctx, m, 0, "tenant")
		done <- result{res, err}
	}()
	for denials.Load() < 2 { // denied and asked again: it waits
		select {
		case w := <-done:
			t.Fatalf("returned while the slot was held: %v", w.err)
		case <-time.After(time.Millisecond):
		}
	}
	require.NoError(t, holder.Release(ctx))
	w := <-done
	require.NoError(t, w.err, "the slot given back admits the waiting call")
	require.NoError(t, w.res.Release(ctx))

	short := &Rule{Name: "slot", Limits: r.Limits, Wait: 30 * time.Millisecond}
	holder, err = short.Reserve(ctx, m, 0, "tenant")
	require.NoError(t, err)
	began := time.Now()
	_, err = short.Reserve(ctx, m, 0, "tenant")
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, concurrency, le.Limit.Algorithm)
	assert.GreaterOrEqual(t, time.Since(began), short.Wait, "denied only once its wait was over")
	require.NoError(t, holder.Release(ctx))
}

// deniedHook counts denials.
type deniedHook struct{ n *atomic.Int64 }

func (h deniedHook) Decided(_ context.Context, _ *Request, d Decision) {
	if !d.Allowed {
		h.n.Add(1)
	}
}

func (deniedHook) Failed(context.Context, *Request, error) {}

// TestConcurrencyCheckFailsEvenUnderAnOverride: Check of a rule with a
// concurrency limit fails as invalid, as it does without overrides, when
// an override replaces the rule's limits (which would drop the slot).
func TestConcurrencyCheckFailsEvenUnderAnOverride(t *testing.T) {
	ctx := context.Background()
	ov := &StaticOverrides{}
	ov.SetRule("slot", Limit{Period: time.Second, Threshold: 3})
	m := NewMemory(WithOverrides(ov))
	r := &Rule{Name: "slot", Limits: []Limit{{Period: time.Second, Threshold: 5}, {Algorithm: concurrency, Threshold: 1}}}
	for range 2 {
		require.ErrorIs(t, r.Check(ctx, m, 1, "k"), ErrInvalidLimit)
	}
	res, err := r.Reserve(ctx, m, 1, "k")
	require.NoError(t, err, "Reserve takes the slot, under the override's rate limit")
	require.NoError(t, res.Release(ctx))
}

// slotsOnly is a memory limiter offering slots but no queue (no OpTurn
// or OpSlotTurn), as a backend written before queues would.
type slotsOnly struct{ m *MemoryLimiter }

func (s slotsOnly) Allow(ctx context.Context, req Request) (Decision, error) {
	return s.m.Allow(ctx, req)
}
func (s slotsOnly) Do(ctx context.Context, op Op) (Result, error) {
	h := Handlers{TakeSlot: s.ReserveSlot, GiveSlot: s.ReleaseSlot, RenewSlot: s.RenewSlot, PeekSlot: s.PeekSlot}
	return h.Do(ctx, s, &op)
}
func (s slotsOnly) Abilities() Abilities {
	return Abilities{Ops: OpsOf(OpTakeSlot, OpGiveSlot, OpRenewSlot, OpPeekSlot), Config: s.m.Abilities().Config}
}
func (s slotsOnly) ReserveSlot(ctx context.Context, req Request, slot Limit, token string) (Decision, time.Time, error) {
	return s.m.ReserveSlot(ctx, req, slot, token)
}
func (s slotsOnly) ReleaseSlot(ctx context.Context, req Request, slot Limit, token string) error {
	return s.m.ReleaseSlot(ctx, req, slot, token)
}
func (s slotsOnly) RenewSlot(ctx context.Context, req Request, slot Limit, token string) (bool, error) {
	return s.m.RenewSlot(ctx, req, slot, token)
}
func (s slotsOnly) PeekSlot(ctx context.Context, req Request, slot Limit) (Decision, int64, error) {
	return s.m.PeekSlot(ctx, req, slot)
}

// TestConcurrencyWaitSleepsWhileARateLimitDenies: a call of a rule with a
// concurrency limit that a rate limit denies sleeps until the rate
// limit's retry instead of polling for a slot, with a queue (the memory
// limiter) and without one: 300 ms of denial cost at most two denied
// tries, where polling every 5–15 ms took 20 or more.
func TestConcurrencyWaitSleepsWhileARateLimitDenies(t *testing.T) {
	ctx := context.Background()
	for _, queued := range []bool{true, false} {
		var denials atomic.Int64
		m := NewMemory(WithHook(deniedHook{&denials}))
		var l Limiter = m
		if !queued {
			l = slotsOnly{m}
		}
		r := &Rule{Name: "paced-slot", Limits: []Limit{{Period: 300 * time.Millisecond, Threshold: 1}, {Algorithm: concurrency, Threshold: 5}}, Wait: 5 * time.Second}
		first, err := r.Reserve(ctx, l, 0, "k")
		require.NoError(t, err)
		require.NoError(t, first.Release(ctx))
		second, err := r.Reserve(ctx, l, 0, "k")
		require.NoError(t, err, "queued %v", queued)
		require.NoError(t, second.Release(ctx))
		assert.LessOrEqual(t, denials.Load(), int64(2), "queued %v: denied tries while the rate limit denied", queued)
	}
}
