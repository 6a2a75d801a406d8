package redislimit

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The bounds of the carry-back: what the local fallback admitted, kept to
// be charged to Redis when it answers again (see the package doc, Outages).
const (
	// maxCarried bounds the admissions remembered, over all calls: an
	// admission beyond it is not carried back (it is counted in dropped).
	maxCarried = 1 << 16
	// maxCarriedPerCall bounds the admissions remembered per name, key and
	// limits: beyond it, an admission is added to the call's latest one,
	// whose time becomes its own, so the units are charged later than
	// they were admitted (which denies more, never less).
	maxCarriedPerCall = 32
	// carryChunk is how many charges one pipeline sends.
	carryChunk = 256
)

// stragglerWait is how long after a breaker closed the charges of the
// fallback's last decisions are carried back (the breaker's wait before
// it tells its Recoverer again, see package guard); recoverTimeout bounds
// a carry-back that a call starts.
const (
	stragglerWait  = 50 * time.Millisecond
	recoverTimeout = 10 * time.Second
)

// carryBack remembers the admissions of the local fallback.
type carryBack struct {
	mu    sync.Mutex
	calls map[string]*carried
	n     int // admissions remembered
	// held is n, read without the lock by the calls that Redis decides,
	// to start a carry-back (see [Limiter.carrySoon]).
	held atomic.Int64
	// scheduled is set while a carry-back started by a call is on its way.
	scheduled atomic.Bool
	// dropped counts the units admitted but not carried back: beyond
	// maxCarried, denied by Redis when carried back (its state was full),
	// or carried back without a reply (Redis may have charged them; they
	// are not sent twice).
	dropped atomic.Int64
	// charged counts the units carried back to Redis.
	charged atomic.Int64

	// running is held by the goroutine carrying back; pending asks it to
	// go round once more; carrying is set while it holds admissions it
	// took (they are in neither calls nor Redis yet).
	running  sync.Mutex
	pending  atomic.Bool
	carrying atomic.Bool
	// settling counts the probes waiting for other processes to carry
	// back; the breaker stays open meanwhile.
	settling atomic.Int32
}

// carried is what the fallback admitted of one name, key and limits: units
// admitted at times (µs on the limiter's clock), oldest first.
type carried struct {
	req ratelimit.Request
	// only lists the limits of req to charge, nil meaning all: a charge
	// of some limits of a call with a key per limit that Redis could not
	// be asked about is remembered without the others.
	only  []int
	at    []int64
	units []int64
}

func newCarryBack() *carryBack { return &carryBack{calls: map[string]*carried{}} }

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

// callID names req's name, key and limits, and those of them to charge.
func callID(req *ratelimit.Request, only []int) string {
	var b strings.Builder
	for _, i := range only {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(',')
	}
	b.WriteString(req.Name)
	b.WriteByte(0)
	b.WriteString(req.Key)
	for _, k := range req.Keys {
		b.WriteByte(1)
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	for _, lim := range req.Limits {
		b.WriteByte(0)
		b.WriteString(string(algorithmOf(lim)))
		if lim.Calendar != "" {
			b.WriteString(" " + lim.Calendar + " " + lim.TZ)
		}
		for _, v := range []int64{int64(lim.Period), lim.Threshold, lim.MaxCost()} {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	return b.String()
}

// record remembers that the fallback admitted req at now, to charge to
// its limits in only (nil: all).
func (c *carryBack) record(req *ratelimit.Request, only []int, now int64) {
	units := req.Units()
	id := callID(req, only)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.calls[id]
	switch {
	case e != nil && len(e.at) >= maxCarriedPerCall:
		last := len(e.at) - 1
		e.at[last] = max(e.at[last], now)
		e.units[last] += units
		return
	case c.n >= maxCarried:
		c.dropped.Add(units)
		return
	case e == nil:
		e = &carried{req: ratelimit.Request{Name: req.Name, Key: req.Key, Keys: req.Keys, Limits: append([]ratelimit.Limit(nil), req.Limits...)}, only: only}
		c.calls[id] = e
	}
	e.at = append(e.at, now)
	e.units = append(e.units, units)
	c.n++
	c.held.Store(int64(c.n))
}

// forget forgets the admissions of name and key (of calls with a key per
// limit, those with key among their keys).
func (c *carryBack) forget(name, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.calls {
		if e.req.Name == name && (e.req.Keys == nil && e.req.Key == key || slices.Contains(e.req.Keys, key)) {
			c.n -= len(e.at)
			c.held.Store(int64(c.n))
			delete(c.calls, id)
		}
	}
}

// size returns how many admissions are remembered.
func (c *carryBack) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// take returns every admission remembered, and forgets them.
func (c *carryBack) take() map[string]*carried {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls, c.n = map[string]*carried{}, 0
	c.held.Store(0)
	return calls
}

// wallNow returns the time in µs of the limiter's clock, or of the
// process's wall clock: the time a charge carried back is made at.
func (l *redisBackend) wallNow() int64 {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now().UnixMicro()
	}
	return time.Now().UnixMicro()
}

// carrySoon starts a carry-back on a goroutine of its own, unless one is
// on its way, when Redis has decided a call and the fallback's admissions
// wait to be carried back while no breaker is open (an open one's probe
// carries them back, a cluster master's too): when breakers are off (no
// probe carries them back), or when the fallback decided a few calls that
// failed without opening a breaker. It costs a decided call one atomic
// load and never blocks it; Redis may decide calls before the
// charges arrive (a round trip or so): the excess they cause is what the
// stated bound counts as admitted by Redis without the fallbacks' charges.
func (l *redisBackend) carrySoon() {
	c := l.carry
	if c.held.Load() == 0 || (l.circuitOpen != nil && l.circuitOpen()) || !c.scheduled.CompareAndSwap(false, true) {
		return
	}
	l.bg.spawn(func(ctx context.Context) {
		defer c.scheduled.Store(false)
		ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
		defer cancel()
		l.carryOut(ctx)
	})
}

// carryOut charges to Redis what the fallback admitted in windows still
// open. It runs on a goroutine of a breaker or of [Limiter.carrySoon]
// (never a caller's): when a probe finds Redis back, before the breaker
// closes, so that Redis decides no call before it has the fallback's
// charges, and again once the breaker closed, for what the fallback
// admitted meanwhile; and after Redis decided a call while admissions
// wait without an open breaker. One goroutine carries
// back at a time; a call while it runs makes it go round once more.
func (l *redisBackend) carryOut(ctx context.Context) {
	c := l.carry
	if c == nil {
		return
	}
	c.pending.Store(true)
	for c.pending.Load() {
		if !c.running.TryLock() {
			return // the goroutine carrying back goes round again
		}
		c.pending.Store(false)
		if c.size() > 0 {
			c.carrying.Store(true)
			l.carryRound(ctx)
			c.carrying.Store(false)
		}
		c.running.Unlock()
	}
}

// carryRound charges every admission remembered, and remembers again those
// that Redis could not be asked about.
func (l *redisBackend) carryRound(ctx context.Context) {
	calls := l.carry.take()
	now := l.wallNow()
	var batch []*charge
	for _, e := range calls {
		for i, at := range e.at {
			batch = append(batch, l.newCharges(e, at, e.units[i], now)...)
		}
	}
	for len(batch) > 0 {
		n := min(len(batch), carryChunk)
		if !l.sendPrevious(ctx, batch[:n]) || !l.sendCharges(ctx, current(batch[:n])) {
			// Redis is away again: keep what was not charged for the next
			// time it answers (a sliding window's ended window that was
			// charged may be charged again then: it denies more, never
			// less).
			for _, ch := range batch {
				if !ch.done {
					l.carry.record(&ch.req, slices.Concat(ch.idx, ch.prev), ch.at)
				}
			}
			return
		}
		batch = batch[n:]
	}
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
// (µs), against the limits of req whose indices are in idx, and, in prev,
// its sliding windows whose window has ended but still weighs.
type charge struct {
	req   ratelimit.Request // Cost is the units
	key   string            // the key of the limits in idx and prev
	at    int64
	idx   []int
	prev  []int
	tries int
	done  bool
}

// newCharges returns the charges of units admitted at at to e's limits
// whose windows are still open at now, none when none is: a sliding log's
// entry still in its period, a window's count in the aligned window
// running now, a bucket's units not yet drained; and a sliding window's
// count in the window before the one running now, where it still weighs
// (previous × (period − elapsed) / period). A call with a key per limit
// gets one charge per key.
func (l *redisBackend) newCharges(e *carried, at, units, now int64) []*charge {
	var chs []*charge
	for i, lim := range e.req.Limits {
		if e.only != nil && !slices.Contains(e.only, i) {
			continue
		}
		p := lim.Period.Microseconds()
		var open, prev bool
		c, calendar := calendarOf(lim)
		switch algorithmOf(lim) {
		case ratelimit.FixedWindow:
			if calendar {
				open = c.End(at) == c.End(now)
			} else {
				open = at/p == now/p
			}
		case ratelimit.SlidingLog:
			open = at > now-p
		case ratelimit.SlidingWindow:
			open = at/p == now/p
			prev = at/p+1 == now/p
		default: // the buckets: the units drain in capacity×period/threshold
			open = at > now-muldiv.Ceil(lim.MaxCost(), p, lim.Threshold)
		}
		if !open && !prev {
			continue
		}
		key := keyOf(&e.req, i)
		var ch *charge
		for _, c := range chs {
			if c.key == key {
				ch = c
				break
			}
		}
		if ch == nil {
			ch = &charge{req: e.req, key: key, at: at}
			ch.req.Cost = units
			chs = append(chs, ch)
		}
		if open {
			ch.idx = append(ch.idx, i)
		} else {
			ch.prev = append(ch.prev, i)
		}
	}
	return chs
}

// previousScript charges units admitted in a sliding window's window that
// has ended to its key, where they weigh on the window after it: to the
// previous count when the key's state has moved to that window, to the
// current one when it has not (the next call moves it), or as a new state
// of that window when there is none; as many as fit under the threshold.
// The window is told by the key's expiry, which the decide script sets to
// the end of the window after the state's, plus keepMs (to the ms, or
// about it where it moves the state with a relative TTL). It returns the
// units charged. KEYS[1] is the key; ARGV: the start (ms) of the window
// the units were admitted in, the period (ms), the units, the threshold.
var previousScript = redis.NewScript(`
local start, p, units, threshold = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local scale, keep = ` + strconv.Itoa(prevScale) + `, ` + strconv.Itoa(keepMs) + `
local e = redis.call("PEXPIRETIME", KEYS[1])
if e == -2 then
  if units > threshold then units = threshold end
  redis.call("SET", KEYS[1], units * scale, "PXAT", start + 3 * p + keep)
  return units
end
local packed = tonumber(redis.call("GET", KEYS[1]))
if e < 0 or not packed then return 0 end
local cur = packed % scale
local prev = (packed - cur) / scale
-- The state's window is the one that starts 2p before its end; the end
-- may be a ms or so off where a script moved it by a relative TTL.
local k = math.floor((e - keep - start + p / 2) / p)
if k == 2 then
  if units > threshold - cur then units = threshold - cur end
  if units <= 0 then return 0 end
  redis.call("INCRBY", KEYS[1], units)
elseif k == 3 then
  if units > threshold - prev then units = threshold - prev end
  if units <= 0 then return 0 end
  redis.call("INCRBY", KEYS[1], units * scale)
else
  return 0
end
return units
`)

// sendPrevious charges the sliding windows in the prev of each of chs, in
// one pipeline (a script not loaded is sent again alone, loading it). It
// returns false when Redis could not be asked.
func (l *redisBackend) sendPrevious(ctx context.Context, chs []*charge) bool {
	type sent struct {
		cmd  *redis.Cmd
		key  string
		args []any
	}
	var all []sent
	pipe := l.client.Pipeline()
	for _, ch := range chs {
		for _, i := range ch.prev {
			lim := ch.req.Limits[i]
			p := lim.Period.Milliseconds()
			key := storageKey(l.prefix, ch.req.Name, ch.key, i, ratelimit.SlidingWindow)
			args := []any{ch.at / 1000 / p * p, p, ch.req.Cost, lim.Threshold}
			all = append(all, sent{previousScript.EvalSha(ctx, pipe, []string{key}, args...), key, args})
		}
	}
	if len(all) == 0 {
		return true
	}
	_, _ = pipe.Exec(ctx)
	for _, s := range all {
		n, err := s.cmd.Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			n, err = previousScript.Run(ctx, l.client, []string{s.key}, s.args...).Int64()
		}
		if err != nil && redisUnavailable(err) {
			return false
		}
		units := s.args[2].(int64)
		l.carry.charged.Add(n)
		l.carry.dropped.Add(units - n)
	}
	return true
}

// args returns the generic decide script's KEYS and ARGV for ch: its
// limits' own keys, at its time.
func (l *redisBackend) chargeArgs(ch *charge) ([]string, []any) {
	keys := make([]string, 0, len(ch.idx))
	args := make([]any, 0, 2+4*len(ch.idx))
	limits := make([]ratelimit.Limit, 0, len(ch.idx))
	for _, i := range ch.idx {
		lim := ch.req.Limits[i]
		keys = append(keys, storageKey(l.prefix, ch.req.Name, ch.key, i, algorithmOf(lim)))
		limits = append(limits, lim)
	}
	return keys, appendLimits(append(args, ch.at, ch.req.Cost), limits, ch.at)
}

// sendCharges charges each of chs with the generic decide script, at its
// time, in one pipeline (a charge whose script is not loaded is sent again
// alone, loading it). A charge denied because its limits have fewer units
// left is charged again with what is left, so Redis gets as much of it as
// fits (its window is then full); what does not fit is dropped. It returns
// false when Redis could not be asked about some of chs: those it may have
// charged without answering are dropped (marked done, so never sent
// twice), the others are kept.
func (l *redisBackend) sendCharges(ctx context.Context, chs []*charge) bool {
	for len(chs) > 0 {
		pipe := l.client.Pipeline()
		cmds := make([]*redis.Cmd, len(chs))
		for i, ch := range chs {
			keys, args := l.chargeArgs(ch)
			cmds[i] = decideScript.EvalSha(ctx, pipe, keys, args...)
		}
		_, _ = pipe.Exec(ctx)
		var again []*charge
		away := false
		for i, ch := range chs {
			res, err := cmds[i].Result()
			if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && !away {
				keys, args := l.chargeArgs(ch)
				res, err = decideScript.Run(ctx, l.client, keys, args...).Result()
			}
			if mayHaveRun(err) {
				// Sent without a reply: Redis may have charged it, so it
				// is not sent again.
				ch.done = true
				l.carry.dropped.Add(ch.req.Cost)
				away = true
				continue
			}
			if err != nil {
				if redisUnavailable(err) || redis.HasErrorPrefix(err, "NOSCRIPT") {
					away = true // not charged: kept for the next time
					continue
				}
				ch.done = true // a key of another type: nothing to charge
				l.carry.dropped.Add(ch.req.Cost)
				continue
			}
			d, err := parseDecision(res)
			switch {
			case err == nil && d.Allowed:
				ch.done = true
				l.carry.charged.Add(ch.req.Cost)
			case err == nil && d.Remaining > 0 && d.Remaining < ch.req.Cost && ch.tries < ratelimit.MaxLimits:
				// Charge what is left; the rest does not fit.
				l.carry.dropped.Add(ch.req.Cost - d.Remaining)
				ch.req.Cost = d.Remaining
				ch.tries++
				again = append(again, ch)
			default:
				ch.done = true
				l.carry.dropped.Add(ch.req.Cost)
			}
		}
		if away {
			return false
		}
		chs = again
	}
	return true
}
