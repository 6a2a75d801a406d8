package redislimit

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// carryChunk is how many charges of a carry-back one pipeline sends.
const carryChunk = 256

// unsent reports whether err failed a call before its command reached
// Redis: an open breaker, a dial, a wait for a pooled connection, a closed
// client. Redis may have run the command of a call that failed otherwise
// without a reply (a read that timed out, a connection reset).
func unsent(err error) bool {
	var op *net.OpError
	return errors.Is(err, ratelimit.ErrCircuitOpen) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted) || errors.Is(err, redis.ErrClosed) ||
		(errors.As(err, &op) && op.Op == "dial")
}

// mayHaveRun reports whether a call that failed with err was sent to
// Redis without a reply coming back: Redis may have run its command.
func mayHaveRun(err error) bool {
	var reply redis.Error
	var malformed *replyError
	return err != nil && !unsent(err) && !errors.As(err, &reply) && !errors.As(err, &malformed)
}

// Carry charges admissions of the local fallback to Redis, at the times
// they were admitted, deciding nothing (see [guard.Carrier]): to each
// admission's sliding logs whose period still holds it, all of it, at its
// time (logScript); to its other limits whose windows are still open, with
// the generic decide script at the admission's time, or on top when it no
// longer fits (up to twice a limit's capacity, as a settle); and to a
// sliding window's previous window, where it still weighs, as much as fits
// there (previousScript). It sends them
// in pipelines of carryChunk; when Redis is away again, it returns what
// was not charged, to be kept for the next time it answers (a sliding
// window's ended window that was charged may be charged again then: it
// denies more, never less).
func (l guarded) Carry(ctx context.Context, admissions []guard.Admission) guard.CarryResult {
	var res guard.CarryResult
	now := l.wallNow()
	var batch []*charge
	for _, a := range admissions {
		batch = append(batch, l.newCharges(a, now)...)
	}
	for len(batch) > 0 {
		n := min(len(batch), carryChunk)
		if !l.sendPrevious(ctx, batch[:n], &res) || !l.sendLogs(ctx, batch[:n], &res) || !l.sendCharges(ctx, current(batch[:n]), &res) {
			for _, ch := range batch {
				if !ch.done {
					res.Kept = append(res.Kept, guard.Admission{Req: ch.req, Only: slices.Concat(ch.idx, ch.logs, ch.prev), At: time.UnixMicro(ch.at)})
				}
			}
			return res
		}
		batch = batch[n:]
	}
	return res
}

// wallNow returns the time in µs of the limiter's clock, or of the
// process's wall clock: the time a charge carried back is made at.
func (l *redisBackend) wallNow() int64 {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now().UnixMicro()
	}
	return time.Now().UnixMicro()
}

// current returns the charges of chs with limits whose windows are open,
// and marks the others done: their sliding windows that ended were charged
// by sendPrevious.
func current(chs []*charge) []*charge {
	var out []*charge
	for _, ch := range chs {
		if len(ch.idx) > 0 {
			out = append(out, ch)
		} else {
			ch.done = true
		}
	}
	return out
}

// charge is one admission of the fallback carried back: units at time at
// (µs), against the limits of req whose indices are in idx, in logs its
// sliding logs, and in prev its sliding windows whose window has ended but
// still weighs.
type charge struct {
	req   ratelimit.Request // Cost is the units
	key   string            // the key of the limits in idx, logs and prev
	name  string            // the name their state belongs to (see Request.Line)
	at    int64
	idx   []int
	logs  []int
	prev  []int
	tries int
	done  bool
}

// newCharges returns the charges of a's units admitted at its time to its limits
// whose windows are still open at now, none when none is: a sliding log's
// entry still in its period, a window's count in the aligned window
// running now, a bucket's units not yet drained; and a sliding window's
// count in the window before the one running now, where it still weighs
// (previous × (period − elapsed) / period). A call with a key per limit
// gets one charge per key (and name: a shared line's state has its own).
func (l *redisBackend) newCharges(a guard.Admission, now int64) []*charge {
	at, units := a.At.UnixMicro(), a.Req.Cost
	var chs []*charge
	for i, lim := range a.Req.Limits {
		if a.Only != nil && !slices.Contains(a.Only, i) {
			continue
		}
		p := lim.Period.Microseconds()
		var open, prev, log bool
		c, calendar := calendarOf(lim)
		switch factsOf(lim).State {
		case limitfacts.Window:
			if calendar {
				open = c.End(at) == c.End(now)
			} else {
				open = at/p == now/p
			}
		case limitfacts.Log:
			open, log = at > now-p, true
		case limitfacts.Windows:
			open = at/p == now/p
			prev = at/p+1 == now/p
		default: // limitfacts.Bucket: the units drain in capacity×period/threshold
			open = at > now-muldiv.Ceil(lim.MaxCost(), p, lim.Threshold)
		}
		if !open && !prev {
			continue
		}
		key := keyOf(&a.Req, i)
		name, _ := a.Req.Line(i)
		var ch *charge
		for _, c := range chs {
			if c.key == key && c.name == name {
				ch = c
				break
			}
		}
		if ch == nil {
			ch = &charge{req: a.Req, key: key, name: name, at: at}
			ch.req.Cost = units
			chs = append(chs, ch)
		}
		switch {
		case open && log:
			ch.logs = append(ch.logs, i)
		case open:
			ch.idx = append(ch.idx, i)
		default:
			ch.prev = append(ch.prev, i)
		}
	}
	return chs
}

// previousScript charges units admitted in a sliding window's window that
// has ended to its key, where they weigh on the window after it (see
// "carry previous sliding_window" in lua/sliding_window.lua.tmpl). It
// returns the units charged. KEYS[1] is the key; ARGV: the start (ms) of
// the window the units were admitted in, the period (ms), the units, the
// threshold.
var (
	previousText   = renderScript("carry.lua.tmpl", scriptData{})
	previousScript = redis.NewScript(sendable(previousText))
)

// sendPrevious charges the sliding windows in the prev of each of chs, in
// one pipeline (see runEach). It returns false when Redis could not be
// asked.
func (l *redisBackend) sendPrevious(ctx context.Context, chs []*charge, res *guard.CarryResult) bool {
	var runs []*carryRun
	for _, ch := range chs {
		for _, i := range ch.prev {
			lim := ch.req.Limits[i]
			p := lim.Period.Milliseconds()
			key := storageKey(l.prefix, ch.name, ch.key, lineIndex(&ch.req, i), ratelimit.SlidingWindow)
			runs = append(runs, &carryRun{ch: ch, i: i, key: key, units: lim.Units(ch.req.Cost),
				args: []any{ch.at / 1000 / p * p, p, lim.Units(ch.req.Cost), lim.Threshold}})
		}
	}
	l.runEach(ctx, previousScript, runs)
	for _, r := range runs {
		if r.err != nil && redisUnavailable(r.err) {
			return false
		}
		res.Charged += r.n
		res.Dropped += r.units - r.n
	}
	return true
}

// logScript charges units admitted at a past time to a sliding log's
// key, at that time, deciding nothing and charging all of them (see
// "carry sliding_log" in lua/sliding_log_settle.lua.tmpl): the generic
// decide script, run at a past time, would log them at the newest entry's
// time, and a charge on top is bounded. It returns the units charged, 0
// when they no longer count. KEYS[1] is the key; ARGV: the time (µs), the
// units, the period (µs), and now (µs, or "" for the server's clock).
var (
	logText   = renderScript("carry_log.lua.tmpl", scriptData{})
	logScript = redis.NewScript(sendable(logText))
)

// sendLogs charges the sliding logs in the logs of each of chs, in one
// pipeline (see runEach), and forgets them once charged. A charge with no
// other limits to charge is then done, and counted once. It returns false
// when Redis could not be asked about some: those it may have charged
// without answering are forgotten too (never sent twice), the others
// kept.
func (l *redisBackend) sendLogs(ctx context.Context, chs []*charge, res *guard.CarryResult) bool {
	var runs []*carryRun
	for _, ch := range chs {
		for _, i := range ch.logs {
			lim := ch.req.Limits[i]
			key := storageKey(l.prefix, ch.name, ch.key, lineIndex(&ch.req, i), ratelimit.SlidingLog)
			runs = append(runs, &carryRun{ch: ch, i: i, key: key, units: lim.Units(ch.req.Cost),
				args: []any{ch.at, lim.Units(ch.req.Cost), lim.Period.Microseconds(), l.now()}})
		}
	}
	l.runEach(ctx, logScript, runs)
	ok := true
	charged := map[*charge]bool{}
	for _, r := range runs {
		switch {
		case mayHaveRun(r.err):
			ok = false // forgotten: never sent twice
		case r.err != nil && redisUnavailable(r.err):
			ok = false
			continue // kept for the next time
		}
		ch := r.ch
		charged[ch] = charged[ch] || r.err == nil && r.n > 0
		ch.logs = slices.DeleteFunc(ch.logs, func(i int) bool { return i == r.i })
		if len(ch.logs) == 0 && len(ch.idx) == 0 {
			// Nothing else to charge (an ended sliding window's units were
			// charged before): done, and counted once.
			ch.done = true
			if charged[ch] {
				res.Charged += ch.req.Cost
			} else {
				res.Dropped += ch.req.Cost
			}
		}
	}
	return ok
}

// carryRun is one run of a carry-back script: on key, the state of limit
// i of ch, charging units; n and err are its reply.
type carryRun struct {
	ch    *charge
	i     int
	key   string
	args  []any
	units int64
	n     int64
	err   error
}

// runEach runs script on each of runs in one pipeline, and again alone a
// run whose reply is NOSCRIPT (which loads the script), and sets each
// run's reply.
func (l *redisBackend) runEach(ctx context.Context, script *redis.Script, runs []*carryRun) {
	if len(runs) == 0 {
		return
	}
	pipe := l.client.Pipeline()
	cmds := make([]*redis.Cmd, len(runs))
	for j, r := range runs {
		cmds[j] = script.EvalSha(ctx, pipe, []string{r.key}, r.args...)
	}
	_, _ = pipe.Exec(ctx)
	for j, r := range runs {
		r.n, r.err = cmds[j].Int64()
		if r.err != nil && redis.HasErrorPrefix(r.err, "NOSCRIPT") {
			r.n, r.err = script.Run(ctx, l.client, []string{r.key}, r.args...).Int64()
		}
	}
}

// args returns the generic decide script's KEYS and ARGV for ch: its
// limits' own keys, at its time.
func (l *redisBackend) chargeArgs(ch *charge) ([]string, []any) {
	keys := make([]string, 0, len(ch.idx))
	args := make([]any, 0, 2+4*len(ch.idx))
	limits := make([]ratelimit.Limit, 0, len(ch.idx))
	for _, i := range ch.idx {
		lim := ch.req.Limits[i]
		keys = append(keys, storageKey(l.prefix, ch.name, ch.key, lineIndex(&ch.req, i), lim.AlgorithmOrDefault()))
		limits = append(limits, lim)
	}
	return keys, appendLimits(append(args, ch.at, ch.req.Cost), limits, ch.at)
}

// sendCharges charges each of chs with the generic decide script, at its
// time, in one pipeline (a charge whose script is not loaded is sent again
// alone, loading it). A charge denied because it does not fit (charges
// carried back out of order fill its window) is charged on top instead
// (chargeOnTop): nothing admitted is dropped for want of room. It returns
// false when Redis could not be asked about some of chs: those it may have
// charged without answering are dropped (marked done, so never sent
// twice), the others are kept.
func (l *redisBackend) sendCharges(ctx context.Context, chs []*charge, out *guard.CarryResult) bool {
	pipe := l.client.Pipeline()
	cmds := make([]*redis.Cmd, len(chs))
	for i, ch := range chs {
		keys, args := l.chargeArgs(ch)
		cmds[i] = decideScript.EvalSha(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx)
	var onTop []*charge
	away := false
	for i, ch := range chs {
		res, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && !away {
			keys, args := l.chargeArgs(ch)
			res, err = decideScript.Run(ctx, l.client, keys, args...).Result()
		}
		if mayHaveRun(err) {
			// Sent without a reply: Redis may have charged it, so it is
			// not sent again.
			ch.done = true
			out.Dropped += ch.req.Cost
			away = true
			continue
		}
		if err != nil {
			if redisUnavailable(err) || redis.HasErrorPrefix(err, "NOSCRIPT") {
				away = true // not charged: kept for the next time
				continue
			}
			ch.done = true // a key of another type: nothing to charge
			out.Dropped += ch.req.Cost
			continue
		}
		d, err := parseDecision(res)
		switch {
		case err == nil && d.Allowed:
			ch.done = true
			out.Charged += ch.req.Cost
		case err == nil:
			// It does not fit at its time: charges carried out of order
			// (other processes', later ones) fill the window. It was
			// admitted all the same: charged on top.
			onTop = append(onTop, ch)
		default:
			ch.done = true
			out.Dropped += ch.req.Cost
		}
	}
	return !away && l.chargeOnTop(ctx, onTop, out)
}

// chargeOnTop charges each of chs at its time on top of its limits'
// state, without deciding (the adjust script at the charge's time): an
// admission that no longer fits its window is charged all the same, so
// the window denies until it drains rather than forgetting it. A limit
// that counts calls is left as it is. It returns false when Redis could
// not be asked: what it may have charged without answering is dropped,
// the rest kept.
func (l *redisBackend) chargeOnTop(ctx context.Context, chs []*charge, out *guard.CarryResult) bool {
	for _, ch := range chs {
		req := ch.req
		req.Limits = slices.Clone(ch.req.Limits)
		for i := range req.Limits {
			req.Limits[i].PerCall = req.Limits[i].PerCall || !slices.Contains(ch.idx, i)
		}
		err := l.adjustRun(ctx, &req, ch.at, ch.at, ch.req.Cost, ch.at, "")
		switch {
		case err == nil:
			ch.done = true
			out.Charged += ch.req.Cost
		case mayHaveRun(err):
			ch.done = true
			out.Dropped += ch.req.Cost
			return false
		case redisUnavailable(err):
			return false
		default:
			ch.done = true
			out.Dropped += ch.req.Cost
		}
	}
	return true
}
