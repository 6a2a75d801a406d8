package guard_test

import (
	"context"
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// TestLeasesServeAHotLine: sequential calls of a leased line are admitted
// from leases, up to the limit and no more.
func TestLeasesServeAHotLine(t *testing.T) {
	g := guard.NewLeases(ratelimit.NewMemory())
	defer g.Close()
	req := ratelimit.Request{Name: "hot", Limits: []ratelimit.Limit{{Algorithm: ratelimit.FixedWindow, Period: time.Hour, Threshold: 500, Prefetch: time.Minute}}}
	admitted := 0
	for range 1000 {
		d, err := g.Allow(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	leases, served := g.Stats()
	if admitted != 500 {
		t.Errorf("admitted %d calls of a limit of 500", admitted)
	}
	if leases == 0 || served < 400 {
		t.Errorf("%d leases served %d calls", leases, served)
	}
	t.Logf("%d leases served %d calls", leases, served)
}
