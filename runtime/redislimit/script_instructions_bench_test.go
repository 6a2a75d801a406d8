package redislimit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkScriptInstructions counts the instructions the server runs per
// decision of each algorithm, for the script written for the limit and for
// the generic one, and per batch of 16 calls of one key for the batch
// scripts, with a no-op script as the floor and the seeds' naive sliding
// log (naiveScript, on the time of each call) as the baseline of
// sliding_log. Instruction counts
// repeat run after run whatever else the machine does, unlike round trips.
// It needs the test server run under callgrind:
//
//	mkdir -p /tmp/ratelimit-callgrind
//	REDIS_SERVER=$PWD/runtime/redislimit/testdata/redis-callgrind.sh \
//	  go test -run '^$' -bench ScriptInstructions -benchtime 500x ./runtime/redislimit/
//
// With CALLGRIND_ARGS="--collect-atstart=no --toggle-collect=evalShaCommand"
// (see testdata/redis-callgrind.sh) only the scripts' own work is counted.
func BenchmarkScriptInstructions(b *testing.B) {
	if filepath.Base(os.Getenv("REDIS_SERVER")) != "redis-callgrind.sh" {
		b.Skip("needs REDIS_SERVER=runtime/redislimit/testdata/redis-callgrind.sh (see the doc comment)")
	}
	srv.Flush(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1, ReadTimeout: time.Minute})
	defer c.Close()
	b.Run("noop", func(b *testing.B) { countInstructions(b, c, noopScript, []string{"noop"}) })
	b.Run("naive", func(b *testing.B) {
		countInstructionsOf(b, c, naiveScript, []string{"naive"}, func() []any {
			return []any{time.Now().UnixMicro(), 1_000_000, 1_000_000}
		})
	})
	for _, alg := range ratelimit.Algorithms() {
		lim := ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: 1_000_000}
		l := New(c)
		own := ratelimit.Request{Name: "own", Limits: []ratelimit.Limit{lim}}
		keys, _ := l.appendCall(nil, nil, &own, "")
		b.Run(string(alg)+"/own", func(b *testing.B) {
			countInstructions(b, c, planScript(planOf(lim)), keys)
		})
		// On a pinned clock (in 2100, after the server's, as window keys
		// expire at times read from it) every call takes the same path.
		pinned := ratelimit.Request{Name: "pinned", Limits: []ratelimit.Limit{lim}}
		pkeys, _ := l.appendCall(nil, nil, &pinned, "")
		clocked := planOf(lim)
		clocked.Clocked = true
		b.Run(string(alg)+"/own_pinned", func(b *testing.B) {
			countInstructions(b, c, planScript(clocked), pkeys, 1, pinnedClock)
		})
		generic := ratelimit.Request{Name: "generic", Limits: []ratelimit.Limit{lim}}
		keys, args := l.appendCall(nil, nil, &generic, "")
		b.Run(string(alg)+"/generic", func(b *testing.B) {
			countInstructions(b, c, decideScript, keys, args...)
		})
		// A batch of 16 calls of one key on the pinned clock, per run
		// (not per call).
		batch := ratelimit.Request{Name: "batch", Limits: []ratelimit.Limit{lim}}
		keys, _ = l.appendCall(nil, nil, &batch, "")
		bkeys, bargs := make([]string, 16), []any{16}
		for i := range bkeys {
			bkeys[i] = keys[0]
			bargs = append(bargs, 1, pinnedClock)
		}
		b.Run(string(alg)+"/batch16", func(b *testing.B) {
			countInstructions(b, c, planBatchScript(planOf(lim)), bkeys, bargs...)
		})
		if alg == ratelimit.SlidingLog {
			// A call of cost 1 and one of cost 5,120, on the pinned
			// clock, each on a log of its own that no run fills.
			big := ratelimit.Limit{Period: time.Second, Threshold: 1 << 40}
			p := planOf(big)
			p.Clocked = true
			for _, cost := range []int64{1, 5120} {
				req := ratelimit.Request{Name: fmt.Sprint("cost", cost), Limits: []ratelimit.Limit{big}}
				keys, _ := l.appendCall(nil, nil, &req, "")
				b.Run(fmt.Sprint(alg, "/own_pinned_cost", cost), func(b *testing.B) {
					countInstructions(b, c, planScript(p), keys, cost, pinnedClock)
				})
			}
		}
		if alg == ratelimit.GCRA {
			gkeys, gargs := []string{}, []any{16}
			for range 16 {
				gkeys, gargs = l.appendCall(gkeys, append(gargs, 1, 2+4), &batch, pinnedClock)
			}
			b.Run("generic/batch16", func(b *testing.B) {
				countInstructions(b, c, batchScript, gkeys, gargs...)
			})
		}
	}
}

// pinnedClock is the time (µs) the pinned-clock runs pass: in 2100.
const pinnedClock = 4_102_444_800_000_000

var callgrindTotal = regexp.MustCompile(`(?m)^(?:totals|summary): (\d+)`)

// countInstructions runs s b.N times between zeroing callgrind's counters
// and dumping them, and reports the instructions per run.
func countInstructions(b *testing.B, c *redis.Client, s *redis.Script, keys []string, args ...any) {
	countInstructionsOf(b, c, s, keys, func() []any { return args })
}

// countInstructionsOf is countInstructions with the arguments of each run
// from args.
func countInstructionsOf(b *testing.B, c *redis.Client, s *redis.Script, keys []string, args func() []any) {
	ctx := context.Background()
	if err := s.Run(ctx, c, keys, args()...).Err(); err != nil {
		b.Fatal(err)
	}
	dir := os.Getenv("CALLGRIND_OUT")
	if dir == "" {
		dir = "/tmp/ratelimit-callgrind"
	}
	before, _ := filepath.Glob(filepath.Join(dir, "out.*.*"))
	if out, err := exec.Command("callgrind_control", "-z").CombinedOutput(); err != nil {
		b.Fatal(err, string(out))
	}
	for range b.N {
		if err := s.EvalSha(ctx, c, keys, args()...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := exec.Command("callgrind_control", "-d").CombinedOutput(); err != nil {
		b.Fatal(err, string(out))
	}
	var dump string
	for range 50 { // the dump is written asynchronously
		after, _ := filepath.Glob(filepath.Join(dir, "out.*.*"))
		if len(after) > len(before) {
			seen := map[string]bool{}
			for _, f := range before {
				seen[f] = true
			}
			for _, f := range after {
				if !seen[f] {
					dump = f
				}
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	text, err := os.ReadFile(dump)
	if err != nil {
		b.Fatal("no callgrind dump appeared:", err)
	}
	defer os.Remove(dump)
	m := callgrindTotal.FindSubmatch(text)
	if m == nil {
		b.Fatal("no totals in", dump)
	}
	total, _ := strconv.ParseFloat(string(m[1]), 64)
	b.ReportMetric(total/float64(b.N), "instr/call")
}
