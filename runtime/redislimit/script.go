package redislimit

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"maps"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	"github.com/ratelimitgen/ratelimitgen/internal/muldiv"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// luaFiles are rendered into the scripts (see lua/README.md): each
// algorithm's file defines its blocks (luaAlgorithms names them), and the
// scripts' files compose them: decide.lua.tmpl into the decide scripts,
// the generic one and one per single limit, batch.lua.tmpl into the batch
// scripts wrapping them, and the reserve, adjust, refund, slot and carry
// scripts.
//
//go:embed lua/*.tmpl
var luaFiles embed.FS

var luaTemplates = parseLuaTemplates()

// parseLuaTemplates parses the templates with the constants (luaConstants)
// and three functions that lay out the blocks: include renders a block (a
// defined template) into a string; indent n starts each of its lines with
// a newline and n spaces (see indentLua), so that a block written from
// column 0 reads as written wherever it is included: {{- include "block"
// . | indent 4}} on a line of its own; and dispatch renders a generic
// script's test of a limit's algorithm (see luaDispatch).
func parseLuaTemplates() *template.Template {
	t := template.New("lua")
	funcs := maps.Clone(luaConstants)
	funcs["include"] = func(name string, d scriptData) (string, error) { return includeLua(t, name, d) }
	funcs["indent"] = indentLua
	funcs["dispatch"] = func(steps string, d scriptData, bind bool) (string, error) {
		return luaDispatch(t, steps, d, bind)
	}
	return template.Must(t.Funcs(funcs).ParseFS(luaFiles, "lua/*.tmpl"))
}

// includeLua renders the block name of t for d.
func includeLua(t *template.Template, name string, d scriptData) (string, error) {
	var b strings.Builder
	err := t.ExecuteTemplate(&b, name, d)
	return b.String(), err
}

// indentLua starts each line of s with a newline and n spaces (a blank
// line stays blank, and a trailing newline is dropped).
func indentLua(n int, s string) string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		b.WriteByte('\n')
		if line != "" {
			b.WriteString(strings.Repeat(" ", n))
			b.WriteString(line)
		}
	}
	return b.String()
}

// The constants of the scripts, which the templates write into the text
// by name (a Lua local would cost the server a load per run).
const (
	// keepMs is how long a key outlives its state: a second, so no TTL is
	// set below a second.
	keepMs = 1000
	// exactBound is 2^53: a product of Lua numbers below it is exact.
	exactBound = 1 << 53
	// halfScale is 2^26: muldiv splits its operands into 26-bit halves.
	halfScale = 1 << 26
	// prevScale is 2^27: a sliding window's key holds the previous
	// window's count times prevScale plus the current window's, both
	// below it (see MaxSlidingWindowThreshold).
	prevScale = 1 << 27
	// logScan is how many entries a sliding log reads with one LRANGE
	// when it scans its entries for a unit (a denial's retry) or for a
	// refund's entries.
	logScan = 64
	// packSlot is 2^6: a packed reply holds s, the bits of its reset, in
	// its low 6 bits, under (remaining * 2^s + reset) * packSlot.
	packSlot = 1 << 6
	// packBound is 2^47: the packed reply's remaining * 2^s stays below it.
	packBound = 1 << 47
)

var luaConstants = template.FuncMap{
	"keepMs":       func() int64 { return keepMs },
	"exactBound":   func() int64 { return exactBound },
	"halfScale":    func() int64 { return halfScale },
	"prevScale":    func() int64 { return prevScale },
	"logScan":      func() int64 { return logScan },
	"packSlot":     func() int64 { return packSlot },
	"packBound":    func() int64 { return packBound },
	"calendarSkew": func() string { return calendarSkewCode },
	"slotPoll":     func() int64 { return ratelimit.SlotPoll.Microseconds() },
}

// decideText is the generic decide script as rendered, which takes its
// limits in ARGV and decides any number of them; decideSource is the text
// sent to Redis (see sendable).
var (
	decideText   = renderScript("decide.lua.tmpl", scriptData{Generic: true})
	decideSource = sendable(decideText)
)

// decideScript is run with EVALSHA; go-redis falls back to EVAL (which
// loads the script again) when the server answers NOSCRIPT, such as after
// a restart or SCRIPT FLUSH.
var decideScript = redis.NewScript(decideSource)

// scriptData is what the scripts are rendered from.
type scriptData struct {
	// Generic asks for the generic script; else the script decides the
	// one limit plan describes.
	Generic bool
	// Lines asks for the generic script that replies with each committed
	// limit's record, for a refund (see lines.go); with Generic.
	Lines bool
	// Slot asks for the queue script that takes a concurrency slot in the
	// call's turn (see queue.go); with Generic.
	Slot bool
	plan
}

// Muldiv reports whether the script needs muldiv: the generic script
// does, a script of no algorithm's does, and a limit's own script does
// from its row's MuldivFromMs on (the buckets' always, sliding_window's
// from 2^27 ms, 37 hours).
func (d scriptData) Muldiv() bool {
	row, ok := luaRow(d.Algorithm)
	return d.Generic || !ok || d.PeriodMs() >= row.MuldivFromMs
}

// Row is the Lua blocks of the algorithm of the script's limit.
func (d scriptData) Row() luaAlgorithm { return luaAlgorithmOf(d.Algorithm) }

// PeriodMs is the period in ms, which is whole for a window.
func (d scriptData) PeriodMs() int64 { return d.Period / 1000 }

// Unit and UnitFrac are one unit's emission interval of a bucket,
// period/threshold µs, as a whole µs and a fraction in 1/threshold µs
// (the twin's limitstate.Plan unit and unitFrac).
func (d scriptData) Unit() int64     { return d.Period / d.Threshold }
func (d scriptData) UnitFrac() int64 { return d.Period % d.Threshold }

// Depth and DepthFrac are a bucket's capacity in µs,
// capacity×period/threshold, as a whole µs and a fraction in 1/threshold
// µs (the twin's limitstate.Plan depth and depthFrac).
func (d scriptData) Depth() int64 {
	q, _ := muldiv.Rem(d.Capacity, d.Period, d.Threshold)
	return q
}

func (d scriptData) DepthFrac() int64 {
	_, r := muldiv.Rem(d.Capacity, d.Period, d.Threshold)
	return r
}

// PackBits returns the bits s of reset in the packed reply of the script
// of a single limit (see lua/reply.lua.tmpl): the fewest that hold the
// longest reset its calls are told (its state's span) and leave room for
// its largest remaining below 2^47; 0 when those do not fit, and the
// script picks s for each reply. A reset longer than the span (the state
// of a longer period before an override) gets the reply array.
func (d scriptData) PackBits() int {
	if d.Generic {
		return 0
	}
	a, _ := limitfacts.Lookup(string(d.Algorithm))
	s := bits.Len64(uint64(a.State.Span(d.Period, d.Threshold, d.Capacity)))
	if s >= 47 || bits.Len64(uint64(max(d.Threshold, d.Capacity))) > 47-s { // packBound
		return 0
	}
	return s
}

// PackScale is 2^PackBits.
func (d scriptData) PackScale() int64 { return 1 << d.PackBits() }

// LazyClock reports whether the script reads the server's clock only when
// a window starts: a limit's own unclocked script whose row says so (the
// windows'), which otherwise knows where it is in the window from its
// key's TTL.
func (d scriptData) LazyClock() bool {
	return !d.Generic && !d.Clocked && lazyClock(d.Algorithm)
}

// lazyClock reports whether alg's own script on the server's clock reads
// it lazily (see luaAlgorithm.LazyClock).
func lazyClock(alg ratelimit.Algorithm) bool {
	row, _ := luaRow(alg)
	return row.LazyClock
}

// plan is a single limit, as a script written for it has it built in.
type plan struct {
	Algorithm                   ratelimit.Algorithm
	Period, Threshold, Capacity int64 // the period in µs
	// Clocked scripts take the time in ARGV (see [ratelimit.WithClock]) instead of
	// reading the server's clock.
	Clocked bool
}

// renderScript renders the template name, a script's file
// (decide.lua.tmpl, ...) or a script defined by name ("reserve slot"), for
// d.
func renderScript(name string, d scriptData) string {
	var b bytes.Buffer
	if err := luaTemplates.ExecuteTemplate(&b, name, d); err != nil {
		panic(err) // the templates are embedded and their data always fits them
	}
	return b.String()
}

// commentLine matches a line of a Lua comment alone.
var commentLine = regexp.MustCompile(`(?m)^[ \t]*--.*\n`)

// sendable returns the script text without its comment lines, which is
// what is sent to Redis: the comments would only make each script's text
// longer in the server's script cache (Redis before 7.4 never evicts it),
// and cost nothing per call either way (the server compiles a script
// once).
func sendable(text string) string { return commentLine.ReplaceAllString(text, "") }

// maxPlanScripts bounds the single-limit scripts a process writes, and so
// the scripts it adds to a server's script cache (which Redis before 7.4
// never evicts): a service has a few limits, but overrides can set any
// values. Limits beyond the bound use the generic script.
const maxPlanScripts = 1024

// scriptKey names a script written for a single limit: the one deciding a
// call, or with batch set the one deciding a batch of calls of the limit.
type scriptKey struct {
	plan
	batch bool
}

// planScripts holds the single-limit scripts written so far. It is read on
// every call and written once per script, so readers load an immutable map
// and a writer replaces it with a copy, under planScriptsMu.
var (
	planScripts   atomic.Pointer[map[scriptKey]*redis.Script]
	planScriptsMu sync.Mutex
)

// planScript returns the script written for the single limit p, or nil
// when maxPlanScripts are written already.
func planScript(p plan) *redis.Script { return loadPlanScript(scriptKey{plan: p}) }

// planBatchScript returns the script that decides a batch of calls of the
// single limit p (whose Clocked is ignored: a batch passes each call's
// time), or nil when maxPlanScripts are written already.
func planBatchScript(p plan) *redis.Script {
	p.Clocked = false
	return loadPlanScript(scriptKey{plan: p, batch: true})
}

func loadPlanScript(k scriptKey) *redis.Script {
	if m := planScripts.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			return s
		}
	}
	planScriptsMu.Lock()
	defer planScriptsMu.Unlock()
	old := planScripts.Load()
	if old == nil {
		old = &map[scriptKey]*redis.Script{}
	}
	if s, ok := (*old)[k]; ok {
		return s
	}
	if len(*old) >= maxPlanScripts {
		return nil
	}
	s := redis.NewScript(planSource(k))
	m := make(map[scriptKey]*redis.Script, len(*old)+1)
	maps.Copy(m, *old)
	m[k] = s
	planScripts.Store(&m)
	return s
}

// planText renders the script k names, with its comments. A batch's loop
// passes each call's time, read once per batch, so the script it wraps is
// a clocked one.
func planText(k scriptKey) string {
	d := scriptData{plan: k.plan}
	d.Clocked = d.Clocked || k.batch
	name := "decide.lua.tmpl"
	if k.batch {
		name = "batch.lua.tmpl"
	}
	return renderScript(name, d)
}

// planSource is the text of the script k names as sent to Redis.
func planSource(k scriptKey) string { return sendable(planText(k)) }

// decide runs a decide script for req, which is valid, and returns its
// decision: for a single limit the script written for it, else the generic
// one. An error is the client's or a malformed reply (*replyError).
func (l *redisBackend) decide(ctx context.Context, req *ratelimit.Request) (ratelimit.Decision, error) {
	var cmd *redis.Cmd
	if len(req.Limits) == 1 && !l.genericOnly {
		cmd = l.decidePlanned(ctx, req)
	}
	if cmd == nil {
		cmd = l.decideGeneric(ctx, req, l.now(), nil)
	}
	res, err := cmd.Result()
	if at, skewed := calendarSkew(err); skewed {
		return l.decideAround(ctx, req, at)
	}
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return parseDecision(res)
}

// decideAround decides req with the generic script, with the bounds of its
// calendar periods around at (µs): the time a calendar skew error told.
func (l *redisBackend) decideAround(ctx context.Context, req *ratelimit.Request, at int64) (ratelimit.Decision, error) {
	res, err := l.decideGeneric(ctx, req, l.now(), &at).Result()
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return parseDecision(res)
}

// decideGeneric runs the generic decide script for req at now (see
// [Limiter.now]), with the bounds of its calendar periods around at (µs),
// or when at is nil around now or the client's clock.
func (l *redisBackend) decideGeneric(ctx context.Context, req *ratelimit.Request, now any, at *int64) *redis.Cmd {
	keys := make([]string, 0, len(req.Limits))
	args := make([]any, 0, 2+4*len(req.Limits))
	keys, args = l.appendCallAt(keys, args, req, now, l.boundsTime(now, at))
	return decideScript.Run(ctx, l.client, keys, args...)
}

// decidePlanned runs the script written for req's single limit, or returns
// nil when there is none.
func (l *redisBackend) decidePlanned(ctx context.Context, req *ratelimit.Request) *redis.Cmd {
	if req.Limits[0].Calendar != "" {
		return nil // its bounds change: the generic script takes them
	}
	p := planOf(req.Limits[0])
	p.Clocked = l.cfg.Clock != nil
	s := planScript(p)
	if s == nil {
		return nil
	}
	name, _ := req.Line(0)
	keys := []string{storageKey(l.prefix, name, keyOf(req, 0), 0, p.Algorithm)}
	var args []any
	switch cost := req.UnitsOf(0); {
	case p.Clocked:
		args = []any{cost, l.cfg.Clock.Now().UnixMicro()}
	case cost != 1:
		args = []any{cost}
	}
	return s.Run(ctx, l.client, keys, args...)
}

// planOf returns the plan of lim, unclocked.
func planOf(lim ratelimit.Limit) plan {
	return plan{Algorithm: lim.AlgorithmOrDefault(), Period: lim.Period.Microseconds(), Threshold: lim.Threshold, Capacity: lim.MaxCost()}
}

// now returns the generic decide script's time argument: the clock's time
// in microseconds, or "" for the script to read the server's clock.
func (l *redisBackend) now() any {
	if l.cfg.Clock != nil {
		return l.cfg.Clock.Now().UnixMicro()
	}
	return ""
}

// appendCall appends the generic decide script's KEYS and ARGV for req at
// time now to keys and args.
func (l *redisBackend) appendCall(keys []string, args []any, req *ratelimit.Request, now any) ([]string, []any) {
	return l.appendCallAt(keys, args, req, now, l.boundsTime(now, nil))
}

// appendCallAt is appendCall with the bounds of req's calendar periods
// around at (µs).
func (l *redisBackend) appendCallAt(keys []string, args []any, req *ratelimit.Request, now any, at int64) ([]string, []any) {
	for i, lim := range req.Limits {
		name, j := req.Line(i)
		keys = append(keys, storageKey(l.prefix, name, keyOf(req, i), j, lim.AlgorithmOrDefault()))
	}
	return keys, appendLimits(append(args, now, req.Units()), req.Limits, at)
}

// appendLimits appends the generic decide script's ARGV of limits (after
// the time and the cost) to args: four per limit, and when a limit has a
// calendar period, the peek argument ("", not peeking; see [withPeek])
// and four bounds per calendar limit, the starts of four of its windows
// in a row around at (µs), computed here because Lua has no time zones.
// A calendar limit's period argument is -j: ARGV[j] is its first bound.
func appendLimits(args []any, limits []ratelimit.Limit, at int64) []any {
	return appendLimitsFrom(args, 3, limits, at)
}

// appendLimitsFrom is appendLimits for a script whose ARGV has the limits
// from ARGV[first] on (the generic decide script's from ARGV[3]; the
// adjust script's from ARGV[4]).
func appendLimitsFrom(args []any, first int, limits []ratelimit.Limit, at int64) []any {
	var bounds []any
	for _, lim := range limits {
		var period any = lim.Period.Microseconds()
		if b, ok := calendarBounds(lim, at); ok {
			period = -(first + 4*len(limits) + 1 + len(bounds))
			bounds = append(bounds, b[0], b[1], b[2], b[3])
		}
		args = append(args, string(lim.AlgorithmOrDefault()), period, thresholdArg(lim), lim.MaxCost())
	}
	if bounds != nil {
		args = append(append(args, ""), bounds...)
	}
	return args
}

// thresholdArg returns lim's threshold as the generic script takes it:
// negated when the limit counts calls ([ratelimit.Limit.PerCall]), so
// that the call takes 1 unit of it whatever its cost.
func thresholdArg(lim ratelimit.Limit) int64 {
	if lim.PerCall {
		return -lim.Threshold
	}
	return lim.Threshold
}

// withPeek returns the generic script's ARGV for a call of n limits, args,
// asking it to peek: its argument after the limits' is "peek".
func withPeek(args []any, n int) []any {
	return withArg(args, 2+4*n, "peek")
}

// withArg returns args with args[i] set to v, appended when args ends at
// i: a script's argument after the limits' ("" when a calendar's bounds
// follow, else absent).
func withArg(args []any, i int, v string) []any {
	if i < len(args) {
		args[i] = v
		return args
	}
	return append(args, v)
}

// calendarOf returns the calendar of lim, a valid limit, if it has a
// calendar period.
func calendarOf(lim ratelimit.Limit) (limitfacts.Calendar, bool) {
	if lim.Calendar == "" {
		return limitfacts.Calendar{}, false
	}
	return limitfacts.Limit{Calendar: lim.Calendar, TZ: lim.TZ}.CalendarOf()
}

// calendarKey names a calendar period in a zone.
type calendarKey struct{ period, tz string }

// calendarWindows holds the latest bounds computed of each calendar period
// and zone (calendarKey → *atomic.Pointer[[4]int64]): the calls in one
// window share them, as computing them takes about as long as the rest of
// building a call.
var calendarWindows sync.Map

// calendarBounds returns the bounds of lim's calendar period around at
// (see [limitfacts.Calendar.Bounds]), if it has one.
func calendarBounds(lim ratelimit.Limit, at int64) ([4]int64, bool) {
	if lim.Calendar == "" {
		return [4]int64{}, false
	}
	k := calendarKey{lim.Calendar, lim.TZ}
	v, _ := calendarWindows.Load(k)
	if v != nil {
		if b := v.(*atomic.Pointer[[4]int64]).Load(); b != nil && b[1] <= at && at < b[2] {
			return *b, true
		}
	}
	c, ok := calendarOf(lim)
	if !ok {
		return [4]int64{}, false
	}
	b := c.Bounds(at)
	if v == nil {
		v, _ = calendarWindows.LoadOrStore(k, new(atomic.Pointer[[4]int64]))
	}
	v.(*atomic.Pointer[[4]int64]).Store(&b)
	return b, true
}

// boundsTime returns the time (µs) around which a call's calendar bounds
// are computed: at when set (the server's time, after a skew), else the
// call's time now when it has one (a clock's), else the client's clock.
func (l *redisBackend) boundsTime(now any, at *int64) int64 {
	switch t, ok := now.(int64); {
	case at != nil:
		return *at
	case ok:
		return t
	}
	return clientClock().UnixMicro()
}

// clientClock reads the client's clock, which places the bounds of
// calendar periods sent to a script that reads the server's. Tests of a
// skewed client replace it.
var clientClock = time.Now

// calendarSkewCode starts the error a generic script replies when a calendar
// limit's bounds do not hold its time (a client clock off by more than a
// window): "CALENDARSKEW <µs>", the time, around which the call is sent
// again. It charged nothing.
const calendarSkewCode = "CALENDARSKEW "

// calendarSkew returns the time a calendar skew error (see
// calendarSkewCode) tells, and whether err is one.
func calendarSkew(err error) (int64, bool) {
	if err == nil { // most calls: errors.As would allocate re
		return 0, false
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return 0, false
	}
	rest, ok := strings.CutPrefix(re.Error(), calendarSkewCode)
	if !ok {
		return 0, false
	}
	at, perr := strconv.ParseInt(rest, 10, 64)
	return at, perr == nil
}

// parseDecision decodes a decision as every script replies it (see
// lua/reply.lua.tmpl): an array of six integers, or the integer that packs
// an admission's remaining and reset.
func parseDecision(res any) (ratelimit.Decision, error) {
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	switch v := res.(type) {
	case int64:
		if v < 0 {
			break
		}
		s := v % packSlot
		v /= packSlot
		return ratelimit.Decision{Allowed: true, Remaining: v >> s, ResetAfter: us(v & (1<<s - 1))}, nil
	case []any:
		if len(v) != 6 {
			return ratelimit.Decision{}, &replyError{n: len(v)}
		}
		var n [6]int64
		for i, x := range v {
			var ok bool
			if n[i], ok = x.(int64); !ok {
				return ratelimit.Decision{}, &replyError{n: len(v)}
			}
		}
		return ratelimit.Decision{
			Allowed:    n[0] == 1,
			Remaining:  n[1],
			RetryAfter: us(n[2]),
			ResetAfter: us(n[3]),
			LimitIndex: int(n[4]),
			Delay:      us(n[5]),
		}, nil
	}
	return ratelimit.Decision{}, &replyError{n: 1}
}
