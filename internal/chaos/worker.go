package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// The processes of a run are OS processes: the run's executable started
// again with workerEnv set, each with one limiter and one client of its
// own, told what to do by messages on its standard input and answering on
// its standard output, one JSON object a line.
const workerEnv = "RATELIMITCHAOS_WORKER"

// WorkerMain makes the running executable a worker of a run when the run
// started it as one: it serves the run on standard input and output and
// exits. Otherwise it returns at once. Call it first thing in main (and
// in TestMain of a test that runs chaos).
func WorkerMain() {
	mode := os.Getenv(workerEnv)
	if mode == "" {
		return
	}
	if mode == "quiet" {
		redis.SetLogger(discardLogger{})
	}
	countBreakers(workerLog(mode))
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chaos worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// endpoint says how a worker's client reaches the topology's Redis.
type endpoint struct {
	Kind   string   `json:"kind"` // standalone, sentinel or cluster
	Addrs  []string `json:"addrs"`
	Master string   `json:"master,omitempty"`
}

// client returns a new client of e, with the settings redislimit
// recommends.
func (e endpoint) client() redis.UniversalClient {
	switch e.Kind {
	case "sentinel":
		return redis.NewFailoverClient(redislimit.FailoverOptions(&redis.FailoverOptions{MasterName: e.Master, SentinelAddrs: e.Addrs}))
	case "cluster":
		return redis.NewClusterClient(redislimit.ClusterOptions(&redis.ClusterOptions{Addrs: e.Addrs}))
	}
	return redis.NewClient(redislimit.ClientOptions(&redis.Options{Addr: e.Addrs[0]}))
}

// ruleSpec is one rule of a fault: a name, an algorithm and a policy.
type ruleSpec struct {
	Name      string                `json:"name"`
	Algorithm ratelimit.Algorithm   `json:"algorithm"`
	Policy    ratelimit.ErrorPolicy `json:"policy"`
}

func (r ruleSpec) rule() *ratelimit.Rule {
	return &ratelimit.Rule{
		Name:    r.Name,
		Limits:  []ratelimit.Limit{{Period: Period, Threshold: Limit, Algorithm: r.Algorithm}},
		OnError: r.Policy,
	}
}

// message is what the run and a worker tell each other. The run sends
// "init" (Endpoint, Goroutines), then per fault "start" (Rules),
// "healed", "await" if the fault was an outage, and "stop"; the worker
// answers "ready", "started", "decided" (Recovered) and "counts"
// (Counts), and "error" (Error) when it cannot. A hot-line run sends
// "init", then "hot" (Hot) and "hotstop", answered "started" and
// "hotcounts" (HotCounts).
type message struct {
	Op         string     `json:"op"`
	Endpoint   *endpoint  `json:"endpoint,omitempty"`
	Goroutines int        `json:"goroutines,omitempty"`
	Rules      []ruleSpec `json:"rules,omitempty"`
	Counts     []Counts   `json:"counts,omitempty"`
	Recovered  bool       `json:"recovered,omitempty"`
	Hot        *hotSpec   `json:"hot,omitempty"`
	HotCounts  *HotCounts `json:"hotCounts,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// Counts are one rule's counts in one process.
type Counts struct {
	Calls, ByRedis, ByFallback, Undecided, RedisBeforeHeal, Denied, Errors int64
	FirstError                                                             string `json:",omitempty"`
}

// counters are one rule's counts, as the calls of a worker add to them.
type counters struct {
	calls, byRedis, byFallback, undecided, redisBeforeHeal, denied, errors atomic.Int64
	firstError                                                             atomic.Pointer[string]
}

func (c *counters) counts() Counts {
	n := Counts{
		Calls: c.calls.Load(), ByRedis: c.byRedis.Load(), ByFallback: c.byFallback.Load(),
		Undecided: c.undecided.Load(), RedisBeforeHeal: c.redisBeforeHeal.Load(),
		Denied: c.denied.Load(), Errors: c.errors.Load(),
	}
	if p := c.firstError.Load(); p != nil {
		n.FirstError = *p
	}
	return n
}

// worker is the state of a worker process.
type worker struct {
	limiter    *redislimit.Limiter
	goroutines int
	rules      []*ratelimit.Rule
	counts     []*counters
	healed     atomic.Bool
	stop       chan struct{}
	wg         sync.WaitGroup
	hot        *hotLoad
}

// serve runs a worker: it reads the run's messages from in and answers on
// out until in ends.
func serve(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	enc := json.NewEncoder(out)
	var w worker
	defer w.close()
	ctx := context.Background()
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		reply := w.handle(ctx, m)
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
}

// handle does what m says and returns the answer.
func (w *worker) handle(ctx context.Context, m message) message {
	switch m.Op {
	case "init":
		c := m.Endpoint.client()
		w.limiter = redislimit.New(c)
		w.goroutines = max(m.Goroutines, 1)
		return message{Op: "ready"}
	case "start":
		w.start(ctx, m.Rules)
		return message{Op: "started"}
	case "healed":
		w.healed.Store(true)
		return message{Op: "healed"}
	case "await":
		return message{Op: "decided", Recovered: awaitRedis(ctx, w.limiter, time.Now().Add(time.Minute))}
	case "stop":
		w.finish()
		counts := make([]Counts, len(w.counts))
		for i, c := range w.counts {
			counts[i] = c.counts()
		}
		return message{Op: "counts", Counts: counts}
	case "hot":
		if m.Hot == nil || w.limiter == nil {
			return message{Op: "error", Error: "hot before init, or without a line"}
		}
		w.startHot(ctx, *m.Hot)
		return message{Op: "started"}
	case "hotstop":
		n := w.stopHot()
		return message{Op: "hotcounts", HotCounts: &n}
	}
	return message{Op: "error", Error: fmt.Sprintf("unknown op %q", m.Op)}
}

// start makes one call of each rule, then starts the goroutines calling
// them in turn, a call every 2ms each.
func (w *worker) start(ctx context.Context, specs []ruleSpec) {
	w.rules, w.counts = nil, nil
	for _, s := range specs {
		w.rules = append(w.rules, s.rule())
		w.counts = append(w.counts, new(counters))
	}
	w.healed.Store(false)
	// Before the load, Redis admits one call of each rule per process.
	for i := range w.rules {
		w.call(ctx, i)
	}
	w.stop = make(chan struct{})
	for g := range w.goroutines {
		w.wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				w.call(ctx, i%len(w.rules))
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
}

// finish stops the goroutines, if they run.
func (w *worker) finish() {
	w.stopHot()
	if w.stop != nil {
		close(w.stop)
		w.wg.Wait()
		w.stop = nil
	}
}

// close stops the worker's calls and closes its limiter, as a service
// that shuts down does: the limiter leaves its fleet, so the next run's
// processes do not count this one.
func (w *worker) close() {
	w.finish()
	if w.limiter != nil {
		_ = w.limiter.Close()
	}
}

// call makes one call of rule i and counts what it saw.
func (w *worker) call(ctx context.Context, i int) {
	c := w.counts[i]
	c.calls.Add(1)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a, err := w.rules[i].Admit(cctx, w.limiter, 1, "k")
	switch {
	case err == nil && !a.Decided:
		c.undecided.Add(1)
	case err == nil && a.Decision.Source == ratelimit.SourceFallback:
		c.byFallback.Add(1)
	case err == nil:
		c.byRedis.Add(1)
		if !w.healed.Load() {
			c.redisBeforeHeal.Add(1)
		}
	case errors.Is(err, ratelimit.ErrLimited):
		c.denied.Add(1)
	default:
		if c.errors.Add(1) == 1 {
			s := err.Error()
			c.firstError.Store(&s)
		}
	}
}

// awaitRedis waits until every breaker of l is closed (a cluster's
// masters' too) and Redis decides a call of a rule no call exhausts, and
// reports whether that happened before deadline.
func awaitRedis(ctx context.Context, l *redislimit.Limiter, deadline time.Time) bool {
	rule := &ratelimit.Rule{Name: "chaos.await", Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1 << 40}}, OnError: ratelimit.FailLocal}
	for {
		if !l.CircuitOpen() {
			a, err := rule.Admit(ctx, l, 1, "await")
			if err == nil && a.Decision.Source == ratelimit.SourceBackend && !l.CircuitOpen() {
				return true
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// process is the run's side of a worker process.
type process struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	enc *json.Encoder
	dec *json.Decoder
}

// startProcess starts a worker process of the running executable, its
// standard error going to log (nil discards it), and sends it init.
func startProcess(e endpoint, goroutines int, log io.Writer) (*process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	mode := "log"
	if log == nil {
		mode = "quiet"
	}
	cmd.Env = append(os.Environ(), workerEnv+"="+mode)
	cmd.Stderr = log
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, in: in, enc: json.NewEncoder(in), dec: json.NewDecoder(bufio.NewReader(out))}
	if _, err := p.ask(message{Op: "init", Endpoint: &e, Goroutines: goroutines}, "ready"); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// ask sends m and returns the answer, which must be want.
func (p *process) ask(m message, want string) (message, error) {
	if err := p.enc.Encode(m); err != nil {
		return message{}, fmt.Errorf("worker %d: %w", p.cmd.Process.Pid, err)
	}
	var r message
	if err := p.dec.Decode(&r); err != nil {
		return message{}, fmt.Errorf("worker %d: %w", p.cmd.Process.Pid, err)
	}
	if r.Op != want {
		return r, fmt.Errorf("worker %d answered %q to %q, not %q: %s", p.cmd.Process.Pid, r.Op, m.Op, want, r.Error)
	}
	return r, nil
}

// close ends the worker: its input ends, and it exits.
func (p *process) close() {
	_ = p.in.Close()
	done := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// askAll sends m to every process at once and returns their answers.
func askAll(procs []*process, m message, want string) ([]message, error) {
	return askEach(procs, func(int) message { return m }, want)
}

// askEach sends process i message m(i), to every process at once, and
// returns their answers.
func askEach(procs []*process, m func(i int) message, want string) ([]message, error) {
	answers := make([]message, len(procs))
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { answers[i], errs[i] = p.ask(m(i), want) })
	}
	wg.Wait()
	return answers, errors.Join(errs...)
}
