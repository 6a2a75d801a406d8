package limitertest

import (
	"context"
	"errors"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// topDenied: a backend that counts denials (ratelimit.OpTopDenied)
// lists the keys its rules denied, most first, each counted at least as
// often as it was denied, keys redacted (a keyhash rule's key as the raw
// key's redacted form), and never a key that was only admitted.
func (s *suite) topDenied(t *testing.T) {
	probe := s.b.New(t)
	if !can(probe, ratelimit.OpTopDenied) {
		t.Skip("the backend counts no denials (no OpTopDenied)")
	}
	ctx := context.Background()
	l := s.b.New(t)
	rule := &ratelimit.Rule{Name: "denied/api", Limits: []ratelimit.Limit{{Period: day, Threshold: 1}}}
	secret := &ratelimit.Rule{Name: "denied/secret", Limits: []ratelimit.Limit{{Period: day, Threshold: 1}}, KeyHash: []bool{true}}
	for range 6 {
		_ = rule.Check(ctx, l, 1, "abuser")
	}
	for range 3 {
		_ = secret.Check(ctx, l, 1, ratelimit.KeyDigest("sk_live_x"))
	}
	_ = rule.Check(ctx, l, 1, "fine")
	top, err := topDenied(ctx, l, 10)
	if err != nil {
		t.Fatalf("TopDenied: %v", err)
	}
	want := []ratelimit.DeniedKey{
		{Name: "denied/api", Key: ratelimit.RedactKey("abuser", false), Denials: 5},
		{Name: "denied/secret", Key: "sha256:" + ratelimit.KeyDigest("sk_live_x")[:12], Denials: 2},
	}
	if len(top) != len(want) {
		t.Fatalf("TopDenied listed %+v, want %+v", top, want)
	}
	for i := range want {
		if top[i].Name != want[i].Name || top[i].Key != want[i].Key || top[i].Denials < want[i].Denials || top[i].Denials-top[i].Error > want[i].Denials {
			t.Errorf("TopDenied[%d] = %+v, want %+v (Denials at least the true count, and within Error of it)", i, top[i], want[i])
		}
	}
}

// topDeniedOutage: with a real outage (Backend.Outage), a backend that
// counts denials fails TopDenied with an error wrapping
// ratelimit.ErrBackend while it is down, and answers again within a
// minute of its return.
func (s *suite) topDeniedOutage(t *testing.T) {
	if s.b.Outage == nil {
		t.Skip("limitertest: Backend.Outage is nil: no real outage to cross")
	}
	l := s.b.New(t)
	if !can(l, ratelimit.OpTopDenied) {
		t.Skip("the backend counts no denials (no OpTopDenied)")
	}
	ctx := context.Background()
	if _, err := topDenied(ctx, l, 10); err != nil {
		t.Fatalf("TopDenied before the outage: %v", err)
	}
	restore := s.b.Outage(t)
	if top, err := topDenied(ctx, l, 10); !errors.Is(err, ratelimit.ErrBackend) {
		t.Fatalf("TopDenied while the backend is down: %+v, %v; want an error wrapping ErrBackend", top, err)
	}
	restore()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		_, err := topDenied(ctx, l, 10)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the backend came back, TopDenied still fails: %v", err)
		}
	}
}
