package redislimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestTopDeniedIsTheFleets is issue 29's finding that /denied showed only
// the replica that answered, so on-call queried each one: three limiters
// on one Redis (three replicas) each deny their own keys, and every one
// of them lists the denials of all three, once each merged (within a
// second), most first, with the keys redacted (a keyhash rule's as the
// raw key's redacted form).
func TestTopDeniedIsTheFleets(t *testing.T) {
	ctx := context.Background()
	srv.Flush(t)
	var replicas []*Limiter
	for range 3 {
		c := srv.Client()
		t.Cleanup(func() { c.Close() })
		l := newTest(c, WithDenyCache(0), withoutHeartbeat())
		t.Cleanup(func() { l.Close() })
		replicas = append(replicas, l)
	}
	rule := &ratelimit.Rule{Name: "api", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
	secret := &ratelimit.Rule{Name: "secret", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}, KeyHash: []bool{true}}
	deny := func(l *Limiter, r *ratelimit.Rule, key string, n int) {
		for range n + 1 { // the first call is admitted
			_ = r.Check(ctx, l, 1, key)
		}
	}
	deny(replicas[0], rule, "abuser", 7)
	deny(replicas[1], rule, "abuser", 5) // 6 denials: the first call too, as replica0 spent the key
	deny(replicas[1], rule, "noisy", 4)
	deny(replicas[2], secret, ratelimit.KeyDigest("sk_live_x"), 3)
	want := []ratelimit.DeniedKey{
		{Name: "api", Key: ratelimit.RedactKey("abuser", false), Kept: "abuser", Denials: 13},
		{Name: "api", Key: ratelimit.RedactKey("noisy", false), Kept: "noisy", Denials: 4},
		{Name: "secret", Key: ratelimit.RedactKey(ratelimit.KeyDigest("sk_live_x"), true), Kept: ratelimit.KeyDigest("sk_live_x"), Denials: 3},
	}
	require.Equal(t, ratelimit.RedactKey(ratelimit.KeyDigest("sk_live_x"), true), "sha256:"+ratelimit.KeyDigest("sk_live_x")[:12])
	for i, l := range replicas {
		t.Run(fmt.Sprint("replica", i), func(t *testing.T) {
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err := l.TopDenied(ctx, 10)
				require.NoError(t, err)
				if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
					require.Equal(t, want, got)
					return
				}
				time.Sleep(50 * time.Millisecond) // the other replicas merge theirs every second
			}
		})
	}
}

// TestMergeDenialsScriptRendersAsGolden compares the script that merges
// denials with its text under testdata/scripts (rewritten with -update);
// the tests of TopDenied run it.
func TestMergeDenialsScriptRendersAsGolden(t *testing.T) {
	matchesGolden(t, "merge_denials", mergeDenialsText)
}

// TestDenialsCountInTheWallClocksMinute: a denial counts in the wall
// clock's minute, which the first denial reads and a timer turns at each
// minute's end (turnMinute, called here at once), until the limiter
// closes.
func TestDenialsCountInTheWallClocksMinute(t *testing.T) {
	c := srv.Client()
	t.Cleanup(func() { c.Close() })
	l := newTest(c, withoutHeartbeat())
	t.Cleanup(func() { l.Close() })
	inMinute := func() {
		t.Helper()
		before := time.Now().Unix() / 60
		got := l.denialTime()
		after := time.Now().Unix() / 60
		require.Zero(t, got.Unix()%60, "the start of a minute")
		require.True(t, got.Unix()/60 >= before-1 && got.Unix()/60 <= after, "minute %d, wall clock's %d..%d", got.Unix()/60, before, after)
	}
	l.CountDenial("api", "k", false)
	inMinute()
	l.redisBackend.denials.minute.Store(1) // a minute of 1970, as if a turn were missed
	l.turnMinute()
	inMinute()
	l.Close()
	l.redisBackend.denials.minute.Store(1)
	l.turnMinute()
	require.Equal(t, int64(1), l.redisBackend.denials.minute.Load(), "no turn after Close")
}
