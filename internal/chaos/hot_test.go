package chaos

import (
	"context"
	"log"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// TestTimelineWindows checks the window figures of a few calls: a call
// whose decision began and returned in one window is certain, one that
// straddles an edge counts in both windows it touches.
func TestTimelineWindows(t *testing.T) {
	type call struct{ begin, end int }
	tests := []struct {
		name  string
		base  int64 // Unix ms of index 0
		calls []call
		want  windowFigures
	}{
		{"straddlers in both windows", 1_000_000_000_000,
			[]call{{100, 100}, {999, 1001}, {1500, 1500}, {2999, 3000}},
			windowFigures{Worst: 2, Certain: 1, Straddling: 2, Sliding: 2, SlidingCertain: 2}},
		{"sliding spans two aligned windows", 1_000_000_000_000,
			[]call{{600, 600}, {700, 700}, {800, 800}, {1200, 1200}, {1300, 1300}},
			windowFigures{Worst: 3, Certain: 3, Straddling: 0, Sliding: 5, SlidingCertain: 5}},
		{"windows aligned on Unix time, not on the base", 1_000_000_000_500,
			[]call{{400, 400}, {600, 600}},
			windowFigures{Worst: 1, Certain: 1, Straddling: 0, Sliding: 2, SlidingCertain: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var begin, end []int64
			for _, c := range tt.calls {
				series{Offset: c.begin, Counts: []int64{1}}.addTo(&begin)
				series{Offset: c.end, Counts: []int64{1}}.addTo(&end)
			}
			tl := newTimeline(tt.base, begin, end)
			assert.Equal(t, tt.want, tl.windows(1000))
			assert.Equal(t, int64(len(tt.calls)), tl.calls())
			assert.Equal(t, int64(len(tt.calls)), tl.returned(tt.base-5000, tt.base+5000))
		})
	}
}

// TestSeriesTrimmed checks that a series keeps its counts without the
// zeros around them, and adds back where it was.
func TestSeriesTrimmed(t *testing.T) {
	s := trimmed([]int64{0, 0, 1, 2, 0})
	assert.Equal(t, series{Offset: 2, Counts: []int64{1, 2}}, s)
	sum := []int64{1}
	s.addTo(&sum)
	assert.Equal(t, []int64{1, 0, 1, 2}, sum)
}

// TestBreakerOpeningsCounted checks that the worker's count of breaker
// openings sees a limiter's breaker open: the count reads the log line
// the breaker writes, so a new wording must fail here, not read 0.
func TestBreakerOpeningsCounted(t *testing.T) {
	prev, flags := slog.Default(), log.Flags()
	countBreakers(nil)
	t.Cleanup(func() {
		slog.SetDefault(prev)
		log.SetOutput(os.Stderr)
		log.SetFlags(flags)
	})
	redis.SetLogger(discardLogger{}) // its failed dials
	// A port nobody listens on: every call is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	l := redislimit.New(redis.NewClient(redislimit.ClientOptions(&redis.Options{Addr: addr})))
	defer l.Close()

	before := breakerOpenings.Load()
	rule := hotSpec{Name: "chaos.breakers", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Second}.rule()
	for deadline := time.Now().Add(time.Minute); breakerOpenings.Load() == before && time.Now().Before(deadline); {
		_, _ = rule.Admit(context.Background(), l, 1, hotKey)
	}
	assert.Greater(t, breakerOpenings.Load(), before, "a breaker that opens is counted")
}

// TestShortHotLine runs a short hot line on a standalone Redis, two
// processes of eight goroutines calling a fixed window of 200/s as fast
// as they can, without a fault and through a 1 s SIGSTOP, with the
// library's defaults, and asserts counts only, never durations or
// speeds:
//
//   - every call is counted once (admitted, denied or failed), and calls
//     are admitted;
//   - when the default error policy is FailLocal (the limiter decides in
//     process what Redis cannot), no 1 s window, straddlers counted in
//     both windows they touch, admits more than the limit once per
//     process and once for Redis: limit × (1 + processes). Under another
//     default (FailOpen lets the calls through undecided) the bound does
//     not hold, and is only logged.
func TestShortHotLine(t *testing.T) {
	const processes, limit = 2, 200
	results, err := RunHot(context.Background(), HotConfig{
		Topology: "standalone", Processes: processes, Goroutines: 8, Limit: limit,
		Algorithms: []ratelimit.Algorithm{ratelimit.FixedWindow},
		Faults:     []string{"none", "SIGSTOP"}, Short: true,
		Log: testWriter{t},
	})
	var table strings.Builder
	HotTable(&table, results)
	t.Log("\n" + table.String())
	require.NoError(t, err)
	require.Len(t, results, 2)

	for _, r := range results {
		assert.Equal(t, r.Calls, r.Admitted()+r.Denied+r.Errors, "%s: every call is counted once", r.Fault)
		assert.Positive(t, r.Admitted(), "%s: calls are admitted", r.Fault)
		assert.Len(t, r.Openings, processes, r.Fault)
		if r.Policy != ratelimit.FailLocal {
			t.Logf("%s: the default error policy is %q, not local: the bound limit × (1 + processes) = %d is not asserted (worst window %d)",
				r.Fault, r.Policy, limit*(1+processes), r.Windows.Worst)
			continue
		}
		assert.LessOrEqual(t, r.Windows.Worst, int64(limit*(1+processes)), "%s: the worst window", r.Fault)
	}
}
