package denied

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSummaryKeepsTheMostDenied: past its slots, a summary still lists a
// key denied more than a 1/Slots-th of the denials, with a count that
// exceeds its true count by at most its error; a minute older than
// Minutes is forgotten.
func TestSummaryKeepsTheMostDenied(t *testing.T) {
	var s Summary
	now := time.Unix(600, 0)
	for i := range 4 * Slots {
		s.Add("api", fmt.Sprint("k", i), false, 1, 0, now)
		if i%4 == 0 {
			s.Add("api", "abuser", true, 3, 0, now)
		}
	}
	top := s.Top(3, now)
	if len(top) != 3 || top[0].Key != "abuser" || !top[0].Hashed {
		t.Fatalf("top = %+v, want abuser first", top)
	}
	if c := top[0].Count; c < 3*Slots || c-top[0].Error > 3*Slots {
		t.Errorf("abuser counted %d ± %d, truly %d", c, top[0].Error, 3*Slots)
	}
	if got := s.Top(3, now.Add(Minutes*time.Minute)); len(got) != 0 {
		t.Errorf("a minute %d minutes old is listed: %+v", Minutes, got)
	}
}

// TestPendingDrains: Drain returns each minute's counts once.
func TestPendingDrains(t *testing.T) {
	var p Pending
	now := time.Unix(600, 0)
	p.Add("api", "a", false, now)
	p.Add("api", "a", false, now)
	p.Add("api", "b", false, now.Add(time.Minute))
	got := p.Drain()
	if len(got) != 2 || got[10][0].Count != 2 || got[11][0].Key != "b" {
		t.Fatalf("Drain = %+v", got)
	}
	if again := p.Drain(); len(again) != 0 {
		t.Errorf("a second Drain = %+v, want nothing", again)
	}
	p.Add("api", "a", false, now)
	if got := p.Drain(); got[10][0].Count != 1 {
		t.Errorf("after a Drain, a new count starts at 1: %+v", got)
	}
}

// TestPendingCountsEveryDenialOfAHotKey: 8 goroutines count 20,000
// denials each, of one hot key and now and then another, while drains
// run beside them: the drains hold every denial, exactly once.
func TestPendingCountsEveryDenialOfAHotKey(t *testing.T) {
	var p Pending
	now := time.Unix(6000, 0)
	const goroutines, each = 8, 20000
	var wg sync.WaitGroup
	done := make(chan struct{})
	got := map[string]int64{}
	var mu sync.Mutex
	drain := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, entries := range p.Drain() {
			for _, e := range entries {
				got[e.Key] += e.Count
			}
		}
	}
	go func() {
		for {
			select {
			case <-done:
				return
			default:
				drain()
			}
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := "hot"
				if i%97 == g {
					key = "cold"
				}
				p.Add("rule", key, false, now)
			}
		}()
	}
	wg.Wait()
	close(done)
	drain()
	cold := int64(0)
	for g := range goroutines {
		for i := range each {
			if i%97 == g {
				cold++
			}
		}
	}
	if got["hot"] != goroutines*each-cold || got["cold"] != cold {
		t.Fatalf("counted %v, want hot %d and cold %d", got, goroutines*each-cold, cold)
	}
}
