package redislimit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// hotKeyEnv makes the test binary a process of BenchmarkRedisHotKey (see
// TestMain): "CONTENDER ADDR START DURATION THRESHOLD ALGORITHM", START in
// Unix ns.
const hotKeyEnv = "RATELIMIT_TEST_HOTKEY"

// The hot key: processes × goroutines calling on one key without pause.
const hotKeyProcesses, hotKeyGoroutines = 4, 64

// hotKeyLimit is the hot key's limit: a window of a second of alg, leased
// by 100ms at most when leases is set.
func hotKeyLimit(alg ratelimit.Algorithm, threshold int64, leases bool) ratelimit.Limit {
	l := ratelimit.Limit{Algorithm: alg, Period: time.Second, Threshold: threshold}
	if leases {
		l.Prefetch = 100 * time.Millisecond
	}
	return l
}

// hotKey is the main of a process of BenchmarkRedisHotKey: from START,
// for DURATION, its goroutines call on the hot key with the contender
// ("leases", "exact" or "redis_rate"), and it prints how many decisions
// it made and admitted, then for each window (Unix second) the calls
// admitted surely in it (the call began and returned in it) and those
// that straddled its end.
func hotKey(spec string) int {
	f := strings.Fields(spec)
	contender, addr := f[0], f[1]
	start, _ := strconv.ParseInt(f[2], 10, 64)
	dur, _ := time.ParseDuration(f[3])
	threshold, _ := strconv.ParseInt(f[4], 10, 64)
	alg := ratelimit.Algorithm(f[5])
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: hotKeyGoroutines})
	defer client.Close()
	ctx := context.Background()
	var allow func() (bool, error)
	served := func() int64 { return 0 }
	switch contender {
	case "redis_rate":
		rr := redis_rate.NewLimiter(client)
		lim := redis_rate.PerSecond(int(threshold))
		allow = func() (bool, error) {
			r, err := rr.Allow(ctx, "hot", lim)
			return err == nil && r.Allowed > 0, err
		}
	default:
		l := New(client)
		defer l.Close()
		served = func() int64 { _, n := l.Leases().Stats(); return n }
		req := ratelimit.Request{Name: "hot", Limits: []ratelimit.Limit{hotKeyLimit(alg, threshold, contender == "leases")}}
		allow = func() (bool, error) {
			d, err := l.Allow(ctx, req)
			return d.Allowed, err
		}
	}
	type tally struct{ sure, straddle map[int64]int64 }
	var decisions, admitted, failed atomic.Int64
	tallies := make([]tally, hotKeyGoroutines)
	time.Sleep(time.Until(time.Unix(0, start)))
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for g := range hotKeyGoroutines {
		tallies[g] = tally{map[int64]int64{}, map[int64]int64{}}
		wg.Go(func() {
			t := tallies[g]
			n := int64(0)
			for ; n&7 != 0 || time.Now().Before(end); n++ {
				before := time.Now().UnixMicro()
				ok, err := allow()
				if err != nil {
					failed.Add(1)
					continue
				}
				if ok {
					after := time.Now().UnixMicro()
					admitted.Add(1)
					if w := before / 1e6; w == after/1e6 {
						t.sure[w]++
					} else {
						t.straddle[w]++
					}
				}
			}
			decisions.Add(n)
		})
	}
	wg.Wait()
	fmt.Printf("hotkey: %d %d %d %d\n", decisions.Load(), admitted.Load(), failed.Load(), served())
	sure, straddle := map[int64]int64{}, map[int64]int64{}
	for _, t := range tallies {
		for w, n := range t.sure {
			sure[w] += n
		}
		for w, n := range t.straddle {
			straddle[w] += n
		}
	}
	for w := range sure {
		fmt.Printf("window: %d %d %d\n", w, sure[w], straddle[w])
	}
	return 0
}

// hotKeyRun is one run of a contender: its processes' decisions and
// admissions, the Redis commands they cost, and the calls admitted per
// window (surely in it, and straddling its end).
type hotKeyRun struct {
	decisions, admitted, commands int64
	served                        int64 // admitted from leases
	took                          time.Duration
	sure, straddle                map[int64]int64
}

// runHotKey runs hotKeyProcesses processes of contender against the
// package's server for dur, the limit's threshold per second, of alg.
func runHotKey(b testing.TB, admin *redis.Client, contender string, alg ratelimit.Algorithm, dur time.Duration, threshold int64) hotKeyRun {
	b.Helper()
	ctx := context.Background()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(500 * time.Millisecond) // every process started
	outs := make([]bytes.Buffer, hotKeyProcesses)
	var cmds []*exec.Cmd
	for i := range hotKeyProcesses {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %s %d %s", hotKeyEnv, contender, srv.Addr, start.UnixNano(), dur, threshold, alg))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	r := hotKeyRun{took: dur, sure: map[int64]int64{}, straddle: map[int64]int64{}}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			b.Fatalf("process %d: %v\n%s", i, err, outs[i].String())
		}
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			var d, a, failed, served, w, sure, straddle int64
			if _, err := fmt.Sscanf(sc.Text(), "hotkey: %d %d %d %d", &d, &a, &failed, &served); err == nil {
				if failed > 0 {
					b.Errorf("%s: process %d: %d calls failed", contender, i, failed)
				}
				r.decisions, r.admitted, r.served = r.decisions+d, r.admitted+a, r.served+served
			}
			if _, err := fmt.Sscanf(sc.Text(), "window: %d %d %d", &w, &sure, &straddle); err == nil {
				r.sure[w] += sure
				r.straddle[w] += straddle
			}
		}
	}
	r.commands = int64(commandsRun(b, admin))
	return r
}

// BenchmarkRedisHotKey runs 4 processes × 64 goroutines on one hot key
// (a fixed window of a second) of the package's server, for a second per
// contender: our limiter with leases (prefetch 100ms), without them, and
// go-redis/redis_rate (GCRA). "unreached" is a limit the load never
// reaches: it reports each one's decisions per second, ours with leases
// as a ratio to redis_rate's, and Redis commands per admitted call.
// "filled" is a limit of 300,000 per second, which the load with leases
// fills: it runs three seconds with leases, requires that no window
// admitted more than the limit (counting only the calls surely in it),
// and reports the least share of the limit a full window admitted.
func BenchmarkRedisHotKey(b *testing.B) {
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	b.Run("unreached", func(b *testing.B) {
		const threshold = 1 << 40
		for range b.N {
			runs := map[string]hotKeyRun{}
			for _, c := range []string{"leases", "exact", "redis_rate"} {
				runs[c] = runHotKey(b, admin, c, ratelimit.FixedWindow, time.Second, threshold)
			}
			for c, r := range runs {
				b.ReportMetric(float64(r.decisions)/r.took.Seconds(), c+"/s")
				b.ReportMetric(float64(r.commands)/float64(max(r.admitted, 1)), c+"-cmds/admitted")
			}
			b.ReportMetric(float64(runs["leases"].decisions)/float64(runs["redis_rate"].decisions), "leases/redis_rate")
			b.ReportMetric(float64(runs["exact"].decisions)/float64(runs["redis_rate"].decisions), "exact/redis_rate")
		}
	})
	b.Run("filled", func(b *testing.B) {
		const threshold = 300_000
		for range b.N {
			r := runHotKey(b, admin, "leases", ratelimit.FixedWindow, 3*time.Second, threshold)
			least := 1.0
			first, last := int64(-1), int64(-1)
			for w := range r.sure {
				if first < 0 || w < first {
					first = w
				}
				last = max(last, w)
			}
			for w, n := range r.sure {
				if n > threshold {
					b.Errorf("window %d admitted %d calls surely in it, over the limit of %d", w, n, threshold)
				}
				if w != first && w != last { // warm and whole
					least = min(least, float64(n)/threshold)
				}
			}
			b.ReportMetric(100*least, "%limit-least-window")
			b.ReportMetric(float64(r.decisions)/r.took.Seconds(), "leases/s")
			b.ReportMetric(float64(r.commands)/float64(max(r.admitted, 1)), "cmds/admitted")
		}
	})
}

// TestHotKeyLeasesFromProcesses: 4 processes × 64 goroutines on one hot
// key whose limit (20,000 per second) they fill, for two seconds, with
// leases: no window admits more than the limit (counting the calls surely
// in it), for a fixed and a sliding window, and leases served calls.
func TestHotKeyLeasesFromProcesses(t *testing.T) {
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	const threshold = 20_000
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			r := runHotKey(t, admin, "leases", alg, 2*time.Second, threshold)
			for w, n := range r.sure {
				if n > threshold {
					t.Errorf("window %d admitted %d calls surely in it, over the limit of %d", w, n, threshold)
				}
			}
			if r.served == 0 {
				t.Errorf("no call of %d admitted was admitted from a lease", r.admitted)
			}
			t.Logf("%d decisions, %d admitted (%d from leases), %d Redis commands", r.decisions, r.admitted, r.served, r.commands)
		})
	}
}
