package guard

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// TestDenyCacheLookupMissAllocatesNothing: the admitted path pays a
// lookup that allocates nothing.
func TestDenyCacheLookupMissAllocatesNothing(t *testing.T) {
	c := newDenyCache(DefaultDenyCache)
	req := ratelimit.Request{Name: "miss", Key: "k", Limits: perPeriod(1, time.Hour)}
	_, p, _ := c.lookup(&req, 0)
	c.remember(&req, p, ratelimit.Decision{RetryAfter: time.Hour}, 0, 0, time.Hour) // the name is known
	req.Key = "other"
	assert.Zero(t, fewestAllocs(func() {
		if _, _, hit := c.lookup(&req, 1); hit {
			t.Fatal("hit")
		}
	}))
}

// TestDenyCacheMemoryIsBounded remembers denials of a million distinct
// keys: the cache's heap stays within its slots' bound (measured bytes
// per slot), and keeps the latest denials.
func TestDenyCacheMemoryIsBounded(t *testing.T) {
	const keys = 1_000_000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("user-%07d", i)
	}
	before := heapInUse()
	c := newDenyCache(DefaultDenyCache)
	req := ratelimit.Request{Name: "abuse", Limits: perPeriod(1, time.Hour)}
	for i, k := range names {
		req.Key = k
		_, p, _ := c.lookup(&req, int64(i))
		c.remember(&req, p, ratelimit.Decision{RetryAfter: time.Hour, ResetAfter: time.Hour}, int64(i), 0, time.Hour)
	}
	used := heapInUse() - before
	held := 0
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			held++
		}
	}
	perSlot := float64(used) / float64(len(c.slots))
	t.Logf("%d slots, %d held, %d bytes of heap (keys' bytes excluded): %.1f bytes per slot", len(c.slots), held, used, perSlot)
	assert.LessOrEqual(t, held, DefaultDenyCache)
	assert.Less(t, perSlot, 128.0)
	req.Key = names[keys-1]
	_, _, hit := c.lookup(&req, keys)
	assert.True(t, hit, "the latest denial is remembered")
	runtime.KeepAlive(c)
	runtime.KeepAlive(names)
}

func heapInUse() int64 {
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return int64(s.HeapAlloc)
}

// perPeriod returns one sliding log limit of n calls per period.
func perPeriod(n int64, period time.Duration) []ratelimit.Limit {
	return []ratelimit.Limit{{Period: period, Threshold: n}}
}

// fewestAllocs returns how many allocations a call of f makes on
// average, as testing.AllocsPerRun does, but robust to the goroutines
// running beside it, whose allocations AllocsPerRun counts too: it
// measures runs of ten calls, and since the other goroutines only ever
// add to a run's count, the fewest a run made, once 20 runs made it, is
// f's own. It samples for at most a minute.
func fewestAllocs(f func()) float64 {
	const calls = 10
	f() // warm up
	var before, after runtime.MemStats
	fewest, times := uint64(math.MaxUint64), 0
	for deadline := time.Now().Add(time.Minute); times < 20 && time.Now().Before(deadline); {
		runtime.ReadMemStats(&before)
		for range calls {
			f()
		}
		runtime.ReadMemStats(&after)
		switch n := after.Mallocs - before.Mallocs; {
		case n < fewest:
			fewest, times = n, 1
		case n == fewest:
			times++
		}
	}
	return float64(fewest) / calls
}
