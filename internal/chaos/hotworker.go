package chaos

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The sources of an admitted call, as a hot line's callers tell them.
const (
	byRedis    = iota // decided by Redis (a lease of Redis's units too)
	byFallback        // decided by the limiter's in-process fallback
	undecided         // let through without a decision (FailOpen)
	nSources
)

// hotKey is the one key of a hot line.
const hotKey = "hot"

// hotSpec is one hot line a worker loads: the rule's name and limit, how
// many goroutines call it, and the base of its timeline (a Unix time in
// ms, before the first call).
type hotSpec struct {
	Name       string              `json:"name"`
	Algorithm  ratelimit.Algorithm `json:"algorithm"`
	Limit      int64               `json:"limit"`
	Period     time.Duration       `json:"period"`
	Goroutines int                 `json:"goroutines"`
	Base       int64               `json:"base"`
}

// rule returns the hot line's rule, with the library's default error
// policy (OnError empty).
func (s hotSpec) rule() *ratelimit.Rule {
	return &ratelimit.Rule{
		Name:   s.Name,
		Limits: []ratelimit.Limit{{Period: s.Period, Threshold: s.Limit, Algorithm: s.Algorithm}},
	}
}

// HotCounts are what one process's callers of a hot line saw.
type HotCounts struct {
	Calls, Denied, Errors int64
	FirstError            string `json:",omitempty"`
	// Openings is the number of times a breaker of the process's limiter
	// opened while the line was loaded.
	Openings int64
	// Policy is the error policy the line's calls were decided under: the
	// limiter's default.
	Policy ratelimit.ErrorPolicy
	// Begin and End count the admitted calls of each source by the ms
	// (from the spec's base) in which their decision began and returned.
	Begin, End [nSources]series
}

// hotLoad is a worker's load of one hot line.
type hotLoad struct {
	spec     hotSpec
	rule     *ratelimit.Rule
	callers  []*hotCaller
	stop     atomic.Bool
	wg       sync.WaitGroup
	openings int64 // breakerOpenings when the load started
}

// hotCaller is what one goroutine of a load counts, unshared so that
// counting costs no more than a few adds.
type hotCaller struct {
	calls, denied, errors int64
	firstError            string
	begin, end            [nSources][]uint32 // by ms from the spec's base
}

// startHot starts the goroutines of spec calling its line as fast as they
// can, each counting what it sees.
func (w *worker) startHot(ctx context.Context, spec hotSpec) {
	w.stopHot()
	l := &hotLoad{spec: spec, rule: spec.rule(), openings: breakerOpenings.Load()}
	for range max(spec.Goroutines, 1) {
		c := &hotCaller{}
		l.callers = append(l.callers, c)
		l.wg.Go(func() {
			for !l.stop.Load() {
				c.call(ctx, w, l)
			}
		})
	}
	w.hot = l
}

// call makes one call of l's line and counts what it saw.
func (c *hotCaller) call(ctx context.Context, w *worker, l *hotLoad) {
	began := time.Now().UnixMicro()
	a, err := l.rule.Admit(ctx, w.limiter, 1, hotKey)
	ended := time.Now().UnixMicro()
	c.calls++
	src := byRedis
	switch {
	case err == nil && !a.Decided:
		src = undecided
	case err == nil && a.Decision.Source == ratelimit.SourceFallback:
		src = byFallback
	case err == nil:
	case errors.Is(err, ratelimit.ErrLimited):
		c.denied++
		return
	default:
		if c.errors++; c.errors == 1 {
			c.firstError = err.Error()
		}
		return
	}
	bump(&c.begin[src], began/1000-l.spec.Base)
	bump(&c.end[src], ended/1000-l.spec.Base)
}

// bump adds one to (*counts)[i], growing it.
func bump(counts *[]uint32, i int64) {
	i = max(i, 0)
	if i >= int64(len(*counts)) {
		*counts = append(*counts, make([]uint32, i+1-int64(len(*counts))+1024)...)
	}
	(*counts)[i]++
}

// stopHot stops the hot load, if one runs, and returns what its callers
// saw.
func (w *worker) stopHot() HotCounts {
	l := w.hot
	if l == nil {
		return HotCounts{}
	}
	w.hot = nil
	l.stop.Store(true)
	l.wg.Wait()
	n := HotCounts{Openings: breakerOpenings.Load() - l.openings, Policy: w.limiter.Config().ErrorPolicy}
	var begin, end [nSources][]int64
	for _, c := range l.callers {
		n.Calls, n.Denied, n.Errors = n.Calls+c.calls, n.Denied+c.denied, n.Errors+c.errors
		if n.FirstError == "" {
			n.FirstError = c.firstError
		}
		for s := range nSources {
			addCounts(&begin[s], c.begin[s])
			addCounts(&end[s], c.end[s])
		}
	}
	for s := range nSources {
		n.Begin[s], n.End[s] = trimmed(begin[s]), trimmed(end[s])
	}
	return n
}

// addCounts adds counts into sum, growing it.
func addCounts(sum *[]int64, counts []uint32) {
	if len(counts) > len(*sum) {
		*sum = append(*sum, make([]int64, len(counts)-len(*sum))...)
	}
	for i, c := range counts {
		(*sum)[i] += int64(c)
	}
}

// breakerOpenings counts the openings of the breakers of this process's
// limiters, as they log them (see breakerCounter).
var breakerOpenings atomic.Int64

// breakerOpened is the message a limiter's breaker logs an opening with,
// to slog.Default() when its hook does not log it (ratelimit.SlogHook's
// BreakerOpened, at Warn or, past a few a minute, at Debug).
const breakerOpened = "ratelimit: circuit open"

// breakerCounter is a slog.Handler that counts breakerOpened records, at
// every level, and passes the records next is enabled for to next. Counting
// the log rather than installing a ratelimit.BreakerHook keeps the limiter
// without options: a hook is told of every failed call too, which would
// change the cost of the calls a hot line measures.
type breakerCounter struct{ next slog.Handler }

func (h breakerCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h breakerCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == breakerOpened {
		breakerOpenings.Add(1)
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h breakerCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return breakerCounter{h.next.WithAttrs(as)}
}

func (h breakerCounter) WithGroup(name string) slog.Handler {
	return breakerCounter{h.next.WithGroup(name)}
}

// countBreakers makes slog.Default() count breaker openings, passing what
// it logs on to w at Info and above (nil discards it). Limiters made
// afterwards log to it.
func countBreakers(w io.Writer) {
	next := slog.DiscardHandler
	if w != nil {
		next = slog.NewTextHandler(w, nil)
	}
	slog.SetDefault(slog.New(breakerCounter{next}))
}

// workerLog is where a worker's log goes: its standard error, unless it
// runs quiet.
func workerLog(mode string) io.Writer {
	if mode == "quiet" {
		return nil
	}
	return os.Stderr
}
