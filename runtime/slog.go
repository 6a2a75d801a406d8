package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// SlogHook is a [Hook] (and a [ShadowHook] and a [BreakerHook]) that logs
// to a [slog.Logger] what an on-call engineer needs: a line when a key
// begins to be limited, not one per denied call. Make one with
// [NewSlogHook]. Its levels mean:
//
//   - Error: the backend could not decide a call (before a circuit breaker
//     opened); at most 10 lines a minute.
//   - Warn: act on it. A name and key began a denial episode ("ratelimit:
//     limited", with the limit and retry_after), or a circuit breaker
//     opened ("ratelimit: circuit open", with the node and the error; at
//     most 5 times a minute per node).
//   - Info: how things go. An episode goes on ("ratelimit: still limited",
//     every 5 minutes) or has ended ("ratelimit: no longer limited"), with
//     the calls denied and admitted meanwhile; a shadow rule's episode
//     began ("ratelimit: shadow limited"); a breaker closed ("ratelimit:
//     circuit closed", with how long it was open).
//   - Debug: every call. Admissions, each denial (the deny cache's repeats
//     never log above Debug), the calls an open breaker refused
//     ([ErrCircuitOpen]), and the lines over the bounds above.
//
// Records carry the limit's name, key, cost and the limit they describe;
// decisions add remaining, retry_after and reset_after (and source when the
// backend did not make them: "fallback" under [FailLocal], or "cache"),
// failures the error, and a line that follows lines left at Debug by a
// bound counts them in unlogged. A key is logged as its digest, "sha256:"
// and 12 hex digits; [SlogHook.WithRawKeys] logs keys as they are. A call
// costs the hook a few atomic operations (records below the logger's level
// are not built), and it remembers at most 4,096 episodes. See Logs in the
// package doc for episodes, digests and bounds.
type SlogHook struct {
	logger  *slog.Logger
	rawKeys bool

	// now tells the time, and epoch is when the hook was made: times are
	// kept as nanoseconds since epoch. Tests replace both.
	now   func() time.Time
	epoch time.Time

	seed     maphash.Seed
	active   atomic.Int64 // episodes in slots that have not ended
	slots    [episodeSets * episodeWays]atomic.Pointer[episode]
	locks    [episodeSets]sync.Mutex // held to put an episode in a set
	starts   lineBudget              // beginnings of episodes logged at Warn (or Info)
	failures lineBudget              // failures logged at Error
	breakers sync.Map                // node → *breakerLog
}

// The bounds of a SlogHook's memory and output.
const (
	// episodeQuiet is how long without a denial ends an episode.
	episodeQuiet = time.Minute
	// episodeReport is how often a long episode is logged again.
	episodeReport = 5 * time.Minute
	// An episode of (name, key) lives in one of the episodeWays slots of
	// the set its hash picks.
	episodeSets, episodeWays = 512, 8
	// budgetWindow is the span over which the lines of a lineBudget are
	// counted.
	budgetWindow = time.Minute
	// maxStarts is how many beginnings of episodes are logged per window.
	maxStarts = 100
	// maxFailures is how many failures are logged at Error per window.
	maxFailures = 10
	// maxOpenings is how many openings of a node's breaker are logged at
	// Warn per window.
	maxOpenings = 5
)

// episode is a denial episode of one (name, key).
type episode struct {
	name, key string
	shown     string // the key as logged (see SlogHook.keyAttr)
	shadow    bool
	first     int64        // when it began
	last      atomic.Int64 // when the pair was last denied
	reported  atomic.Int64 // when it was last logged above Debug
	denied    atomic.Int64
	admitted  atomic.Int64
	unlogged  atomic.Bool // its beginning was over the budget: its lines are Debug
	ended     atomic.Bool
}

// NewSlogHook returns a hook that logs to logger (slog.Default() if nil),
// with keys shown by their digests.
func NewSlogHook(logger *slog.Logger) *SlogHook {
	if logger == nil {
		logger = slog.Default()
	}
	now := time.Now
	h := &SlogHook{logger: logger, now: now, epoch: now(), seed: maphash.MakeSeed()}
	h.starts.max, h.failures.max = maxStarts, maxFailures
	return h
}

// WithRawKeys returns a new hook that logs to h's logger as h does, but
// shows each key as hooks see it (the key, or the stand-in of a long one)
// instead of its digest. Use it only where the logs may hold the keys,
// which are often personal data (user ids, addresses, tokens).
func (h *SlogHook) WithRawKeys() *SlogHook {
	n := NewSlogHook(h.logger)
	n.rawKeys = true
	return n
}

// Decided logs an admission at Debug, and a denial at Warn when it begins
// a denial episode of its name and key, else at Debug. See [Hook].
func (h *SlogHook) Decided(ctx context.Context, req *Request, d Decision) {
	req = lineRequest(req, d)
	if !d.Allowed {
		h.denied(ctx, req, d, false)
		return
	}
	if h.active.Load() != 0 {
		h.admitted(ctx, req)
	}
	h.decision(ctx, slog.LevelDebug, "ratelimit: admitted", req, d)
}

// ShadowLimited logs a would-be denial at Info when it begins a denial
// episode of its name and key, else at Debug. See [ShadowHook].
func (h *SlogHook) ShadowLimited(ctx context.Context, req *Request, d Decision) {
	h.denied(ctx, lineRequest(req, d), d, true)
}

// lineRequest returns req as the hook logs a decision d of it: for a call
// with a key per limit, with Key the key of the limit d describes, whose
// episode it is.
func lineRequest(req *Request, d Decision) *Request {
	if req.Keys == nil || d.LimitIndex < 0 || d.LimitIndex >= len(req.Keys) {
		return req
	}
	line := *req
	line.Key, line.Keys = req.Keys[d.LimitIndex], nil
	return &line
}

// Failed logs a backend failure at Error (at most 10 a minute, the others
// at Debug), or at Debug when an open circuit breaker refused the call.
// See [Hook].
func (h *SlogHook) Failed(ctx context.Context, req *Request, err error) {
	level := slog.LevelError
	if errors.Is(err, ErrCircuitOpen) {
		level = slog.LevelDebug
	}
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := h.request(req, -1)
	attrs = append(attrs, slog.Any("error", err))
	if level == slog.LevelError {
		ok, unlogged := h.failures.take(h.clock())
		if !ok {
			level = slog.LevelDebug
			if !h.logger.Enabled(ctx, level) {
				return
			}
		} else if unlogged > 0 {
			attrs = append(attrs, slog.Int64("unlogged", unlogged))
		}
	}
	h.logger.LogAttrs(ctx, level, "ratelimit: backend failure", attrs...)
}

// BreakerOpened logs at Warn that the breaker of node opened (at most 5
// times a minute per node, the others at Debug). See [BreakerHook].
func (h *SlogHook) BreakerOpened(node string, err error) {
	b := h.breaker(node)
	level, attrs := slog.LevelWarn, []slog.Attr{slog.String("node", node), slog.Any("error", err)}
	ok, unlogged := b.openings.take(h.clock())
	b.logged.Store(ok)
	if !ok {
		level = slog.LevelDebug
	} else if unlogged > 0 {
		attrs = append(attrs, slog.Int64("unlogged", unlogged))
	}
	h.logger.LogAttrs(context.Background(), level, "ratelimit: circuit open", attrs...)
}

// BreakerClosed logs at Info that Redis at node decides again, or at
// Debug when its opening was logged at Debug. See [BreakerHook].
func (h *SlogHook) BreakerClosed(node string, open time.Duration) {
	level := slog.LevelInfo
	if !h.breaker(node).logged.Load() {
		level = slog.LevelDebug
	}
	h.logger.LogAttrs(context.Background(), level, "ratelimit: circuit closed",
		slog.String("node", node), slog.Duration("open_for", open))
}

// breakerLog is what a SlogHook keeps of the breaker of one node.
type breakerLog struct {
	openings lineBudget
	logged   atomic.Bool // whether its last opening was logged above Debug
}

// breaker returns what h keeps of the breaker of node.
func (h *SlogHook) breaker(node string) *breakerLog {
	if b, ok := h.breakers.Load(node); ok {
		return b.(*breakerLog)
	}
	b := &breakerLog{}
	b.openings.max = maxOpenings
	got, _ := h.breakers.LoadOrStore(node, b)
	return got.(*breakerLog)
}

// denied logs the denial d of req, real or shadow, as the beginning of an
// episode, a report on one going on, or at Debug.
func (h *SlogHook) denied(ctx context.Context, req *Request, d Decision, shadow bool) {
	msg, level := "ratelimit: limited", slog.LevelWarn
	if shadow {
		msg, level = "ratelimit: shadow limited", slog.LevelInfo
	}
	if !h.logger.Enabled(ctx, level) {
		h.decision(ctx, slog.LevelDebug, msg, req, d)
		return
	}
	now := h.clock()
	set := h.set(req.Name, req.Key)
	if e, _ := h.find(set, req.Name, req.Key); e != nil && now-e.last.Load() < int64(episodeQuiet) {
		h.repeat(ctx, e, msg, req, d, now)
		return
	}
	if d.Source == SourceCache {
		// A repeat of a denial whose episode the hook has forgotten.
		h.decision(ctx, slog.LevelDebug, msg, req, d)
		return
	}
	// Begin an episode, unless a call that raced with this one has. Only
	// beginnings lock (their set), so two cannot fill two slots with one pair.
	mu := &h.locks[set/episodeWays]
	mu.Lock()
	e, slot := h.find(set, req.Name, req.Key)
	if e != nil && now-e.last.Load() < int64(episodeQuiet) {
		mu.Unlock()
		h.repeat(ctx, e, msg, req, d, now)
		return
	}
	old := e
	if e == nil {
		slot, old = h.victim(set)
	}
	n := &episode{name: req.Name, key: req.Key, shown: h.shownKey(req, req.Key, d.LimitIndex), shadow: shadow, first: now}
	n.last.Store(now)
	n.reported.Store(now)
	n.denied.Store(1)
	for !h.slots[slot].CompareAndSwap(old, n) {
		old = h.slots[slot].Load() // an admission ended it and emptied its slot
	}
	h.active.Add(1)
	mu.Unlock()
	if old != nil {
		h.end(ctx, old, now)
	}
	ok, unlogged := h.starts.take(now)
	if !ok {
		n.unlogged.Store(true)
		h.decision(ctx, slog.LevelDebug, msg, req, d)
		return
	}
	var extra []slog.Attr
	if unlogged > 0 {
		extra = append(extra, slog.Int64("unlogged", unlogged))
	}
	h.decision(ctx, level, msg, req, d, extra...)
}

// repeat counts the denial d of req in its episode e, going on at now,
// and logs it at Debug, or as a report on e when one is due.
func (h *SlogHook) repeat(ctx context.Context, e *episode, msg string, req *Request, d Decision, now int64) {
	e.denied.Add(1)
	e.last.Store(now)
	if r := e.reported.Load(); d.Source != SourceCache && !e.unlogged.Load() &&
		now-r >= int64(episodeReport) && e.reported.CompareAndSwap(r, now) {
		h.decision(ctx, slog.LevelInfo, "ratelimit: still limited", req, d, h.summary(e, now)...)
		return
	}
	h.decision(ctx, slog.LevelDebug, msg, req, d)
}

// admitted counts an admission in the episode of its pair, or ends the
// episode when it has been quiet long enough.
func (h *SlogHook) admitted(ctx context.Context, req *Request) {
	e, slot := h.find(h.set(req.Name, req.Key), req.Name, req.Key)
	if e == nil {
		return
	}
	now := h.clock()
	if now-e.last.Load() < int64(episodeQuiet) {
		e.admitted.Add(1)
		return
	}
	if h.slots[slot].CompareAndSwap(e, nil) {
		h.end(ctx, e, now)
	}
}

// end ends e, which is no longer in its slot, once: at Info when it ended
// by keeping quiet and its beginning was logged; otherwise (another pair
// took its place while it went on) silently.
func (h *SlogHook) end(ctx context.Context, e *episode, now int64) {
	if !e.ended.CompareAndSwap(false, true) {
		return
	}
	h.active.Add(-1)
	if e.unlogged.Load() || now-e.last.Load() < int64(episodeQuiet) {
		return
	}
	msg := "ratelimit: no longer limited"
	if e.shadow {
		msg = "ratelimit: no longer shadow limited"
	}
	if !h.logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 5)
	attrs = append(attrs, slog.String("name", e.name))
	if e.key != "" {
		attrs = append(attrs, slog.String("key", e.shown))
	}
	attrs = append(attrs, h.summary(e, e.last.Load())...)
	h.logger.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}

// summary returns the attributes that sum e up at now: the calls denied
// and admitted since it began, and for how long it has gone on.
func (h *SlogHook) summary(e *episode, now int64) []slog.Attr {
	return []slog.Attr{
		slog.Int64("denied", e.denied.Load()),
		slog.Int64("admitted", e.admitted.Load()),
		slog.Duration("for", time.Duration(now-e.first)),
	}
}

// set returns the index of the first slot of the set of (name, key).
func (h *SlogHook) set(name, key string) int {
	sum := maphash.String(h.seed, key) ^ bits.RotateLeft64(maphash.String(h.seed, name), 32)
	return int(sum%episodeSets) * episodeWays
}

// find returns the episode of (name, key) in the set starting at slot
// set, ended or not, and its slot; nil when there is none.
func (h *SlogHook) find(set int, name, key string) (*episode, int) {
	for i := set; i < set+episodeWays; i++ {
		if e := h.slots[i].Load(); e != nil && e.key == key && e.name == name {
			return e, i
		}
	}
	return nil, 0
}

// victim returns the slot of the set starting at set where a new episode
// goes, and what it holds: an empty one, else one that has ended, else the
// least recently denied.
func (h *SlogHook) victim(set int) (int, *episode) {
	slot, old, oldest := set, (*episode)(nil), int64(0)
	for i := set; i < set+episodeWays; i++ {
		e := h.slots[i].Load()
		if e == nil || e.ended.Load() {
			return i, e
		}
		if last := e.last.Load(); old == nil || last < oldest {
			slot, old, oldest = i, e, last
		}
	}
	return slot, old
}

// clock returns the time as nanoseconds since the hook was made.
func (h *SlogHook) clock() int64 { return int64(h.now().Sub(h.epoch)) }

func (h *SlogHook) decision(ctx context.Context, level slog.Level, msg string, req *Request, d Decision, extra ...slog.Attr) {
	if !h.logger.Enabled(ctx, level) {
		return
	}
	attrs := h.request(req, d.LimitIndex)
	attrs = append(attrs, slog.Int64("remaining", d.Remaining))
	if !d.Allowed {
		attrs = append(attrs, slog.Duration("retry_after", d.RetryAfter))
	}
	attrs = append(attrs, slog.Duration("reset_after", d.ResetAfter))
	if d.Delay > 0 {
		attrs = append(attrs, slog.Duration("delay", d.Delay))
	}
	if d.Source != SourceBackend {
		attrs = append(attrs, slog.String("source", d.Source.String()))
	}
	attrs = append(attrs, extra...)
	h.logger.LogAttrs(ctx, level, msg, attrs...)
}

// request returns the attributes of req and of its limit i.
func (h *SlogHook) request(req *Request, i int) []slog.Attr {
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("name", req.Name))
	if req.Key != "" {
		attrs = append(attrs, slog.String("key", h.shownKey(req, req.Key, i)))
	}
	attrs = append(attrs, slog.Int64("cost", req.Units()))
	if i >= 0 && i < len(req.Limits) {
		attrs = append(attrs, slog.String("limit", req.Limits[i].String()))
	}
	return attrs
}

// shownKey returns key, the key of req's limit i, as logged: its
// redacted form (see [Request.RedactedKey]), or with WithRawKeys the key
// itself.
func (h *SlogHook) shownKey(req *Request, key string, i int) string {
	if h.rawKeys {
		return key
	}
	return req.RedactedKey(key, i)
}

// lineBudget bounds how many lines of a kind are logged per budgetWindow.
type lineBudget struct {
	max      int64
	start    atomic.Int64 // when the current window began
	used     atomic.Int64 // lines taken in it
	unlogged atomic.Int64 // lines refused since the last one taken
}

// take reports whether a line may be logged at now and, if so, how many
// were refused since the last line taken. Its bound is approximate: calls
// that race with the start of a window may take a few more.
func (b *lineBudget) take(now int64) (ok bool, unlogged int64) {
	if s := b.start.Load(); now-s >= int64(budgetWindow) && b.start.CompareAndSwap(s, now) {
		b.used.Store(0)
	}
	if b.used.Add(1) > b.max {
		b.unlogged.Add(1)
		return false, 0
	}
	if b.unlogged.Load() == 0 {
		return true, 0
	}
	return true, b.unlogged.Swap(0)
}
