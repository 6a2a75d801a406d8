package redislimit

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// queueEnv makes the test binary a process of TestWaitersAcrossProcesses
// (see TestMain): "ADDR START P", START the Unix time (ns) at which its
// waiters begin, P its index.
const queueEnv = "RATELIMIT_TEST_QUEUE"

// The processes × waiters of the test, and the spacing of the limit's
// admissions (one call per queueSpacing): far longer than a reply takes
// to reach its caller on a loaded machine, so that the times at which
// the processes see their admissions keep the order Redis made them in.
const (
	queueProcesses, queueWaiters = 3, 16
	queueSpacing                 = 200 * time.Millisecond
	queueArrivals                = 40 * time.Millisecond // between waiters beginning to wait
)

// queueRule is the rule the processes share.
func queueRule() *ratelimit.Rule {
	return &ratelimit.Rule{Name: "queue-procs", Limits: []ratelimit.Limit{{Period: queueSpacing, Threshold: 1}}, Wait: time.Minute}
}

// waiterLog records what a waiting call's tries were told (see
// queueProcess).
type waiterLog struct {
	ratelimit.Limiter
	q queuer

	mu       sync.Mutex
	ticket   int64     // its place, once it had one
	admitted time.Time // when the admission reached it
	tries    int
	early    int       // tries before the RetryAfter it was told
	back     time.Time // when it may come back
}

func (w *waiterLog) AllowInTurn(ctx context.Context, req ratelimit.Request, ticket int64, wait time.Duration) (ratelimit.Decision, int64, time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tries++; time.Now().Before(w.back) {
		w.early++
	}
	d, held, at, err := w.q.AllowInTurn(ctx, req, ticket, wait)
	now := time.Now()
	switch {
	case err != nil:
	case d.Allowed:
		w.admitted = now
	default:
		if w.ticket == 0 {
			w.ticket = held
		}
		w.back = now.Add(d.RetryAfter)
	}
	return d, held, at, err
}

// Do logs OpTurn, and passes on the other operations.
func (w *waiterLog) Do(ctx context.Context, op ratelimit.Op) (ratelimit.Result, error) {
	h := ratelimit.Handlers{Next: w.Limiter, Turn: w.AllowInTurn}
	return h.Do(ctx, w, &op)
}

// queueProcess is the main of a process of TestWaitersAcrossProcesses:
// its waiters begin to wait in turn with the other processes', one every
// queueArrivals, and it prints a line per waiter: "waiter TICKET
// ADMITTED TRIES EARLY" (ADMITTED in Unix ns, 0 when not admitted).
func queueProcess(spec string) int {
	f := strings.Fields(spec)
	start, _ := strconv.ParseInt(f[1], 10, 64)
	p, _ := strconv.Atoi(f[2])
	client := redis.NewClient(&redis.Options{Addr: f[0], PoolSize: queueWaiters})
	defer client.Close()
	l := newTest(client, withoutHeartbeat())
	r := queueRule()
	logs := make([]*waiterLog, queueWaiters)
	var wg sync.WaitGroup
	for i := range queueWaiters {
		logs[i] = &waiterLog{Limiter: l, q: l}
		begin := time.Unix(0, start).Add(time.Duration(i*queueProcesses+p) * queueArrivals)
		wg.Go(func() {
			time.Sleep(time.Until(begin))
			if err := r.Check(context.Background(), logs[i], 1, "shared"); err != nil {
				fmt.Fprintln(os.Stderr, "waiter:", err)
			}
		})
	}
	wg.Wait()
	for _, w := range logs {
		var at int64
		if !w.admitted.IsZero() {
			at = w.admitted.UnixNano()
		}
		fmt.Printf("waiter %d %d %d %d\n", w.ticket, at, w.tries, w.early)
	}
	return 0
}

// waiterResult is a line of queueProcess.
type waiterResult struct {
	ticket, admitted int64
	tries, early     int
}

// TestWaitersAcrossProcesses runs queueProcesses copies of the test
// binary, queueWaiters waiting calls each, on one key whose limit admits
// a call per queueSpacing and is used up when they begin: every waiter is
// admitted, in the order of the tickets Redis gave them when they began
// to wait (the server's clock), none overtaken; none asks again before
// the RetryAfter it was told (no polling); and the queue is empty after
// them.
func TestWaitersAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	srv.Flush(t)
	ctx := context.Background()
	l := newTest(srv.Client(), withoutHeartbeat())
	now := &ratelimit.Rule{Name: queueRule().Name, Limits: queueRule().Limits}
	for now.Check(ctx, l, 1, "shared") == nil { // used up when the waiters begin
	}
	start := time.Now().Add(2 * time.Second) // once every process has started
	var outs [queueProcesses]bytes.Buffer
	var cmds []*exec.Cmd
	for p := range queueProcesses {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", queueEnv, srv.Addr, start.UnixNano(), p))
		cmd.Stdout, cmd.Stderr = &outs[p], &outs[p]
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	var all []waiterResult
	for p, cmd := range cmds {
		require.NoError(t, cmd.Wait(), outs[p].String())
		n := 0
		for sc := bufio.NewScanner(&outs[p]); sc.Scan(); {
			var w waiterResult
			if _, err := fmt.Sscanf(sc.Text(), "waiter %d %d %d %d", &w.ticket, &w.admitted, &w.tries, &w.early); err == nil {
				all, n = append(all, w), n+1
			}
		}
		require.Equal(t, queueWaiters, n, "process %d:\n%s", p, outs[p].String())
	}

	tries, early, placed := 0, 0, 0
	for _, w := range all {
		assert.NotZero(t, w.admitted, "a waiter was not admitted")
		tries += w.tries
		early += w.early
		if w.ticket != 0 {
			placed++
		}
	}
	// The order in which the waiters were admitted, and the tickets that
	// order shows: each must be later than every ticket before it.
	slices.SortFunc(all, func(a, b waiterResult) int { return cmp.Compare(a.admitted, b.admitted) })
	overtaken := 0
	for i, w := range all {
		for _, v := range all[i+1:] {
			if w.ticket != 0 && v.ticket != 0 && v.ticket < w.ticket {
				overtaken++
			}
		}
	}
	assert.Zero(t, overtaken, "pairs of waiters admitted out of the order they began to wait")
	assert.Zero(t, early, "tries before the RetryAfter they were told")
	assert.Greater(t, placed, queueProcesses*queueWaiters/2, "most waiters began to wait behind others")
	order := l.queueKey(&ratelimit.Request{Name: queueRule().Name, Key: "shared", Limits: queueRule().Limits})
	assert.Zero(t, srv.Client().Exists(ctx, order, order+":due").Val(), "the queue's keys outlived its waiters")
	t.Logf("%d waiters in %d processes, %d of them placed in the queue: %d tries (%.2f per admission), %d overtaken, %d early",
		len(all), queueProcesses, placed, tries, float64(tries)/float64(len(all)), overtaken, early)
}
