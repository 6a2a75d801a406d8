package guard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Epocher is a [Heartbeater] backend that can tell when it lost its state
// (a restart without persistence, a flush, a failover to a replica that
// lacked it): it keeps an epoch marker with its state, set to a fresh
// value when absent, so a marker that reads differently from one read
// before says that the state was lost between the two reads. An empty
// marker says that the backend cannot tell.
type Epocher interface {
	Heartbeater
	// Epoch returns the backend's epoch marker, first setting it to fresh
	// when it is absent.
	Epoch(ctx context.Context, fresh string) (string, error)
	// BeatEpoch is Beat, which also returns Epoch(ctx, fresh), in one
	// round trip.
	BeatEpoch(ctx context.Context, member string, now time.Time, ttl time.Duration, fresh string) (int64, string, error)
}

// newEpoch returns a fresh epoch marker: 16 random hex digits.
func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// beatOnce renews the process's member and reads how many members are
// live, and whether the backend lost its state since the previous beat
// (or epoch check) when it is an [Epocher], in one round trip.
func (f *Fleet) beatOnce(ctx context.Context) (n int64, lost bool, err error) {
	ep, ok := f.hb.(Epocher)
	if !ok {
		n, err = f.hb.Beat(ctx, f.id, time.Now(), HeartbeatTTL)
		return n, false, err
	}
	n, epoch, err := ep.BeatEpoch(ctx, f.id, time.Now(), HeartbeatTTL, newEpoch())
	if err != nil {
		return 0, false, err
	}
	return n, f.observe(epoch), nil
}

// observe notes the backend's epoch marker, as a beat or an epoch check
// read it, and reports whether it differs from the one noted before (the
// backend lost its state since): once per change, whoever reads it first.
// An empty marker tells nothing.
func (f *Fleet) observe(epoch string) bool {
	if epoch == "" {
		return false
	}
	f.epochMu.Lock()
	defer f.epochMu.Unlock()
	lost := f.epoch != "" && epoch != f.epoch
	f.epoch = epoch
	return lost
}

// tell tells each join of the heartbeat that the backend answered a beat
// or an epoch check, and whether it lost its state since the one before,
// outside the lock of the fleets.
func (f *Fleet) tell(lost bool) {
	var told []func(bool)
	fleets.mu.Lock()
	for m := range f.members {
		if m.beaten != nil {
			told = append(told, m.beaten)
		}
	}
	fleets.mu.Unlock()
	for _, beaten := range told {
		beaten(lost)
	}
}

// onBeat has m's heartbeat call beaten after each beat (or epoch check)
// that the backend answered, with whether it lost its state since the one
// before; beaten must not block long.
func (m *FleetMember) onBeat(beaten func(lost bool)) {
	fleets.mu.Lock()
	defer fleets.mu.Unlock()
	m.beaten = beaten
}
