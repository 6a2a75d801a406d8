package redislimit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// slotsEnv makes the test binary a process of TestSlotsAcrossProcesses
// (see TestMain): "work ADDR" or "hold ADDR".
const slotsEnv = "RATELIMIT_TEST_SLOTS"

// The processes × goroutines of the test, each making calls that hold one
// of slotsLimit slots for a little while.
const slotsProcesses, slotsGoroutines, slotsCalls, slotsLimit = 3, 64, 15, 10

// slotsRule is the rule the processes share: waiting for a slot (up to a
// minute: a call is never refused while one frees).
func slotsRule(lease time.Duration) *ratelimit.Rule {
	return &ratelimit.Rule{Name: "procs", Limits: []ratelimit.Limit{concurrencyLimit(slotsLimit, lease)}, Wait: time.Minute}
}

// inFlightKey counts the calls holding a slot, across processes: each
// counts itself in after it took its slot and out before it gives it back.
const inFlightKey = "slots-test:inflight"

// slotsProcess is the main of a process of TestSlotsAcrossProcesses.
func slotsProcess(spec string) int {
	mode, addr, _ := strings.Cut(spec, " ")
	client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: slotsGoroutines})
	defer client.Close()
	l := newTest(client, withoutHeartbeat())
	ctx := context.Background()
	if mode == "hold" {
		r := slotsRule(2 * time.Second)
		for range slotsLimit {
			if _, err := r.Reserve(ctx, l, 0, "held"); err != nil {
				fmt.Println("error:", err)
				return 1
			}
		}
		fmt.Println("held")
		select {} // renewing the leases until killed
	}
	r := slotsRule(10 * time.Second)
	var done, refused, over, most atomic.Int64
	var wg sync.WaitGroup
	for range slotsGoroutines {
		wg.Go(func() {
			for range slotsCalls {
				res, err := r.Reserve(ctx, l, 0, "shared")
				if err != nil {
					refused.Add(1)
					fmt.Fprintln(os.Stderr, err)
					continue
				}
				n, err := client.Incr(ctx, inFlightKey).Result()
				if err == nil && n > slotsLimit {
					over.Add(1)
				}
				for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				client.Decr(ctx, inFlightKey)
				if err := res.Release(ctx); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Printf("slots: %d %d %d %d\n", done.Load(), refused.Load(), over.Load(), most.Load())
	return 0
}

// TestSlotsAcrossProcesses runs slotsProcesses copies of the test binary,
// slotsGoroutines goroutines each, sharing slotsLimit slots on one Redis:
// no more calls ever hold a slot at once, and every call gets one (waiting
// while none is free). Then a process takes every slot of a key and is
// killed: its slots come back once their lease ends, not before.
func TestSlotsAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv.Flush(t)
	var outs [slotsProcesses]bytes.Buffer
	var cmds []*exec.Cmd
	for i := range slotsProcesses {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), slotsEnv+"=work "+srv.Addr)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	most := int64(0)
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), outs[i].String())
		var done, refused, over, m int64
		found := false
		for sc := bufio.NewScanner(&outs[i]); sc.Scan(); {
			if _, err := fmt.Sscanf(sc.Text(), "slots: %d %d %d %d", &done, &refused, &over, &m); err == nil {
				found = true
			}
		}
		require.True(t, found, "process %d printed no counts:\n%s", i, outs[i].String())
		assert.Equal(t, int64(slotsGoroutines*slotsCalls), done, "every call got a slot")
		assert.Zero(t, refused)
		assert.Zero(t, over, "calls in flight beyond the limit")
		most = max(most, m)
	}
	t.Logf("at most %d calls in flight of %d slots", most, slotsLimit)

	t.Run("KilledProcess", testKilledProcessSlots)
}

// testKilledProcessSlots starts a process that takes every slot of a key
// under a 2 s lease, renewing it, and kills it: the slots are taken until
// the lease of its last renewal ends, and free within a lease after the
// kill.
func testKilledProcessSlots(t *testing.T) {
	ctx := context.Background()
	lease := 2 * time.Second
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slotsEnv+"=hold "+srv.Addr)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	started := time.Now()
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)
	// Let it renew at least once (every third of a lease).
	time.Sleep(lease / 2)
	require.NoError(t, cmd.Process.Kill())
	killed := time.Now()
	_ = cmd.Wait()

	l := newTest(srv.Client(), withoutHeartbeat())
	r := slotsRule(lease)
	r.Wait = 0
	for {
		res, err := r.Reserve(ctx, l, 0, "held")
		if err == nil {
			// The slots were taken at started or later, for a lease.
			assert.GreaterOrEqual(t, time.Since(started), lease, "a slot freed before its lease ended")
			require.NoError(t, res.Release(ctx))
			break
		}
		require.ErrorIs(t, err, ratelimit.ErrLimited)
		require.Less(t, time.Since(killed), lease+time.Minute, "the killed process's slots never came back")
		time.Sleep(20 * time.Millisecond)
	}
	n, err := srv.Client().ZCard(ctx, l.slotKey(&ratelimit.Request{Name: "procs", Key: "held"})).Result()
	require.NoError(t, err)
	t.Logf("slots came back %s after the kill; %s", time.Since(killed).Round(time.Millisecond), strconv.FormatInt(n, 10)+" left in the key")
}
