package httplimit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/denied"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// adminPage is the most rules one response of [AdminHandler] lists.
const adminPage = 100

// AdminOption configures [AdminHandler].
type AdminOption func(*admin)

// WithAdminReset lets [AdminHandler] reset a key's state (POST or DELETE
// of .../key); without it the handler is read-only.
func WithAdminReset() AdminOption { return func(a *admin) { a.reset = true } }

// AdminHandler returns an operator's view of limiter and rules, as JSON:
//
//	GET .../rules[?offset=N]     the rules, at most 100 a response (next: the offset of
//	                             the following page), each with its directive limits,
//	                             its effective limits on limiter (after the rule's
//	                             overrides) and its wait, onerror and shadow options;
//	                             each limit of a rule with a key per limit has its
//	                             key_expr ("" for one counting every call as one)
//	GET .../key?name=N&key=K[&cost=C]
//	                             why rule N's key K is limited: its effective limits and
//	                             where they come from (from: key, tier:<tier>, rule or
//	                             directive; see [ratelimit.Rule.Explain]), what a call of
//	                             cost C (default 1) would be told now, charging nothing
//	                             ([ratelimit.Rule.Peek]), and how much longer a denial of
//	                             it is repeated from a deny cache (cached_for), if one is,
//	                             and the units of its leased line this process holds
//	                             unused in a lease (leased: a call of this process is
//	                             admitted from them, so the decision, as Allow's, then
//	                             has them as remaining, source lease, and the line's
//	                             state counts them as left; see Limit.Prefetch)
//	                             (of a rule with a concurrency limit, the decision counts
//	                             its slots: see [ratelimit.Peek]);
//	                             for a rule with a key per limit, key=K keys each of its
//	                             keyed limits (or key=K1&key=K2…, one per keyed limit in
//	                             order), and each limit is shown with its key expression,
//	                             its key and where it comes from (lines)
//	GET .../limiter              the limiter's open circuit breakers, by node, and since
//	                             when; and the fields of its overrides that cannot be used
//	GET .../denied               the most-denied keys of the last five minutes, redacted
//	                             (see [ratelimit.Request.RedactedKey]): the fleet's, as the
//	                             limiter's [ratelimit.OpTopDenied] keeps them (the memory
//	                             and Redis limiters do), else this process's, with [WithDenials]
//	POST or DELETE .../key?name=N&key=K
//	                             [ratelimit.Reset] of rule N's key K, only with [WithAdminReset]
//
//	GET .../                     the page for on-call: HTML, no script, no external asset:
//	                             the rules and their lines, open breakers, override
//	                             problems, the most-denied keys, and a form (?name=N&key=K
//	                             [&cost=C]) that explains in a sentence why a key is limited
//
// The handler answers on any path ending in /rules, /key, /limiter or
// /denied, and on any path ending in / with the page, so it can be
// mounted under any prefix. Only the names of rules
// are looked up; a key is shown bounded, as the limiters keep it (see
// [ratelimit.Request.Key]), and may be given as its stand-in, as errors
// show it, or, for a key the most-denied keys list, as its redacted form,
// as they show it (the page links each to its lookup; the answer shows
// it redacted still). It reveals
// keys (user ids, addresses), and with [WithAdminReset] lifts limits:
// mount it behind the service's own authentication and authorization,
// never on a public listener. Rules are taken as given: each generated
// file declares RateLimitRules, which returns its package's rules, so
//
//	mux.Handle("/admin/ratelimit/", requireOperator(httplimit.AdminHandler(limiter, store.RateLimitRules())))
//
// mounts the view of package store's (append the rules of several
// packages, and those of [Middleware], into one slice).
func AdminHandler(limiter ratelimit.Limiter, rules []*ratelimit.Rule, opts ...AdminOption) http.Handler {
	a := &admin{limiter: limiter, byName: make(map[string]*ratelimit.Rule, len(rules))}
	for _, r := range rules {
		if _, ok := a.byName[r.Name]; !ok { // methods sharing a name= are one rule
			a.byName[r.Name] = r
			a.rules = append(a.rules, r)
		}
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// admin is the handler AdminHandler returns.
type admin struct {
	limiter ratelimit.Limiter
	rules   []*ratelimit.Rule
	byName  map[string]*ratelimit.Rule
	reset   bool
	denials *Denials
}

// adminLimit is the JSON form of a [ratelimit.Limit].
type adminLimit struct {
	Text      string              `json:"text"`
	Period    string              `json:"period"`
	TZ        string              `json:"tz,omitempty"`
	Threshold int64               `json:"threshold"`
	Algorithm ratelimit.Algorithm `json:"algorithm"`
	Burst     int64               `json:"burst,omitempty"`
	Capacity  int64               `json:"capacity,omitempty"`
	// KeyExpr is the limit's key expression in a rule with a key per
	// limit ("" for a limit that counts every call as one); absent in a
	// rule whose limits share the call's key.
	KeyExpr *string `json:"key_expr,omitempty"`
	// Shared is the name of the shared line the limit is, if it is one
	// (see [ratelimit.Rule.Shared]).
	Shared string `json:"shared,omitempty"`
}

// adminState is what one limit holds for its key now, read without
// charging anything: the units left for a call (remaining, counting the
// call's cost as unspent), the units used of its budget (the limit's
// MaxCost: its burst, capacity or threshold), when it is whole again
// (reset_after) and how long a call of the cost shown would wait.
type adminState struct {
	Budget     int64  `json:"budget"`
	Used       int64  `json:"used"`
	Remaining  int64  `json:"remaining"`
	ResetAfter string `json:"reset_after"`
	Allowed    bool   `json:"allowed"`
	RetryAfter string `json:"retry_after"`
}

// adminLine is a limit of a call, as .../key shows it: with its key, the
// source of its limit and its state for that key.
type adminLine struct {
	adminLimit
	Key   string      `json:"key"`
	From  string      `json:"from"`
	State *adminState `json:"state,omitempty"`
}

type adminRule struct {
	Name       string                `json:"name"`
	Limits     []adminLimit          `json:"limits"`
	Effective  []adminLimit          `json:"effective"`
	Overridden bool                  `json:"overridden"`
	Wait       string                `json:"wait,omitempty"`
	OnError    ratelimit.ErrorPolicy `json:"onerror,omitempty"`
	Shadow     bool                  `json:"shadow,omitempty"`
}

// keyView is .../key's answer for a rule of one key.
type keyView struct {
	Name      string        `json:"name"`
	Key       string        `json:"key"`
	Cost      int64         `json:"cost"`
	Limits    []adminLimit  `json:"limits"`
	From      string        `json:"from"`
	Lines     []adminLine   `json:"lines"`
	Decision  adminDecision `json:"decision"`
	CachedFor string        `json:"cached_for,omitempty"`
	// Leased is the units of the key's leased line (its line with a
	// prefetch) that the lease guard holds leased unused in this process:
	// the decision's remaining when the lease answers it (source lease),
	// and counted as not used in the line's state.
	Leased int64 `json:"leased,omitempty"`
	// leasedAt is the leased line's index.
	leasedAt int
}

// linesView is .../key's answer for a rule with a key per limit.
type linesView struct {
	Name     string        `json:"name"`
	Cost     int64         `json:"cost"`
	Lines    []adminLine   `json:"lines"`
	Verdict  string        `json:"verdict,omitempty"`
	From     string        `json:"from,omitempty"`
	Decision adminDecision `json:"decision"`
}

type adminDecision struct {
	Allowed    bool   `json:"allowed"`
	Remaining  int64  `json:"remaining"`
	RetryAfter string `json:"retry_after"`
	ResetAfter string `json:"reset_after"`
	Delay      string `json:"delay"`
	Limit      int    `json:"limit"`
	Source     string `json:"source"`
}

func (a *admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			adminMethods(w, "GET, HEAD")
			return
		}
		a.page(w, r)
		return
	}
	switch path.Base(r.URL.Path) {
	case "rules":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			adminMethods(w, "GET, HEAD")
			return
		}
		a.listRules(w, r)
	case "key":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.peek(w, r)
		case http.MethodPost, http.MethodDelete:
			if !a.reset {
				adminMethods(w, "GET, HEAD")
				return
			}
			a.resetKey(w, r)
		default:
			methods := "GET, HEAD"
			if a.reset {
				methods += ", POST, DELETE"
			}
			adminMethods(w, methods)
		}
	case "denied":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			adminMethods(w, "GET, HEAD")
			return
		}
		a.listDenied(w, r)
	case "limiter":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			adminMethods(w, "GET, HEAD")
			return
		}
		a.showLimiter(w, r)
	default:
		adminError(w, http.StatusNotFound, "not found: want .../rules, .../key, .../limiter or .../denied")
	}
}

// listRules writes a page of the rules.
func (a *admin) listRules(w http.ResponseWriter, r *http.Request) {
	offset := 0
	if v := r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			adminError(w, http.StatusBadRequest, "offset: want a whole number")
			return
		}
		offset = min(n, len(a.rules))
	}
	end := min(offset+adminPage, len(a.rules))
	page := struct {
		Rules []adminRule `json:"rules"`
		Total int         `json:"total"`
		Next  *int        `json:"next,omitempty"`
	}{Rules: make([]adminRule, 0, end-offset), Total: len(a.rules)}
	for _, rule := range a.rules[offset:end] {
		eff, from := rule.Explain(r.Context(), a.limiter)
		effExprs := rule.KeyExprs
		if len(eff) != len(rule.KeyExprs) {
			effExprs = nil // an override exempts or blocks every call
		}
		effShared := rule.Shared
		if len(eff) != len(rule.Shared) {
			effShared = nil
		}
		page.Rules = append(page.Rules, adminRule{
			Name:       rule.Name,
			Limits:     withShared(adminLimitsOf(rule.Limits, rule.KeyExprs), rule.Shared),
			Effective:  withShared(adminLimitsOf(eff, effExprs), effShared),
			Overridden: overridden(from),
			OnError:    rule.OnError,
			Shadow:     rule.Shadow,
		})
		if rule.Wait > 0 {
			page.Rules[len(page.Rules)-1].Wait = rule.Wait.String()
		}
	}
	if end < len(a.rules) {
		page.Next = &end
	}
	adminJSON(w, http.StatusOK, page)
}

// overridden reports whether any of the sources from, as Rule.Explain
// returns them, is an override.
func overridden(from []string) bool {
	for _, f := range from {
		if f != "directive" {
			return true
		}
	}
	return false
}

// target returns the rule and key a request of .../key names, or why
// there is none.
func (a *admin) target(r *http.Request) (*ratelimit.Rule, string, error) {
	q := r.URL.Query()
	rule, ok := a.byName[q.Get("name")]
	if !ok {
		return nil, "", &lookupError{http.StatusNotFound, "no rule of that name"}
	}
	key := q.Get("key")
	if rule.KeyExprs == nil {
		var err error
		if key, err = a.limiterKey(r.Context(), rule.Name, allHashed(rule), key); err != nil {
			return nil, "", err
		}
	}
	return rule, key, nil
}

// limiterKey returns the key the limiter keeps for given, a key of rule
// name as on-call types it: for a keyhash=true limit (hashed), the digest
// of given, or given's digest itself when written sha256:<its 64 hex
// digits>. The redacted form the page and logs show (sha256: and 12 hex
// digits) names the key the most-denied keys list with it (the page
// links each to its lookup); one they do not list is refused, saying what
// to give instead, rather than looked up as a key of its own (which
// would answer for a key no one uses).
func (a *admin) limiterKey(ctx context.Context, name string, hashed bool, given string) (string, error) {
	digits, digest := strings.CutPrefix(given, "sha256:")
	if digest && len(digits) == 12 && isHex(digits) {
		if kept, ok := a.deniedKey(ctx, name, given); ok {
			return kept, nil
		}
		what := "the key itself"
		if hashed {
			what = "the key itself, or its whole digest (sha256: and the 64 hex digits of printf %s \"$key\" | sha256sum)"
		}
		return "", &lookupError{http.StatusBadRequest, "key " + given + " is a key's redacted form, and none of the most-denied keys of the last five minutes has it: give " + what}
	}
	if !hashed {
		return given, nil
	}
	if digest && len(digits) == 64 && isHex(digits) {
		return digits, nil // the limiter knows the key by this digest
	}
	return ratelimit.KeyDigest(given), nil
}

// shownKey returns what the view shows of key, the key the limiter keeps
// for given: given itself when it is a redacted form, which the view
// answers for without showing the key; else key, bounded.
func shownKey(given, key string) string {
	if digits, ok := strings.CutPrefix(given, "sha256:"); ok && len(digits) == 12 && isHex(digits) {
		return given
	}
	return callkey.Named(key)
}

// isHex reports whether s is lowercase hex digits.
func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// allHashed reports whether every limit of rule is keyed by the digest of
// the caller's key (keyhash=true): its .../key takes the raw key.
func allHashed(rule *ratelimit.Rule) bool {
	for i := range rule.Limits {
		if !hashedLimit(rule, i) {
			return false
		}
	}
	return len(rule.Limits) > 0
}

// hashedLimit reports whether limit i of rule is keyed by a digest.
func hashedLimit(rule *ratelimit.Rule, i int) bool {
	return i < len(rule.KeyHash) && rule.KeyHash[i]
}

// peek writes the state of a rule's key.
func (a *admin) peek(w http.ResponseWriter, r *http.Request) {
	view, err := a.lookup(r)
	if err != nil {
		adminFailure(w, err)
		return
	}
	adminJSON(w, http.StatusOK, view)
}

// lookupError is a request of .../key that cannot be answered, with its
// HTTP status.
type lookupError struct {
	status int
	msg    string
}

func (e *lookupError) Error() string { return e.msg }

// lookup returns the state of the rule and key r names: a keyView or a
// linesView.
func (a *admin) lookup(r *http.Request) (any, error) {
	rule, key, err := a.target(r)
	if err != nil {
		return nil, err
	}
	cost := int64(1)
	if v := r.URL.Query().Get("cost"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, &lookupError{http.StatusBadRequest, "cost: want a positive whole number"}
		}
		cost = n
	}
	if rule.KeyExprs != nil {
		return a.peekLines(r, rule, cost)
	}
	ctx := r.Context()
	limits, from := rule.Explain(ctx, a.limiter, key)
	limits = keepSlot(rule, limits)
	var d ratelimit.Decision
	if cost == 1 || len(limits) == 1 && (limits[0].Algorithm == ratelimit.Unlimited || limits[0].Algorithm == ratelimit.Block) {
		d, err = rule.Peek(ctx, a.limiter, key)
	} else {
		d, err = ratelimit.Peek(ctx, a.limiter, ratelimit.Request{Name: rule.Name, Key: key, Cost: cost, Limits: limits})
	}
	if err != nil {
		return nil, err
	}
	given := shownKey(r.URL.Query().Get("key"), key)
	view := keyView{Name: rule.Name, Key: given, Cost: cost, Limits: adminLimits(limits), From: from[0], Lines: []adminLine{}, Decision: adminDecision{
		Allowed:    d.Allowed,
		Remaining:  d.Remaining,
		RetryAfter: shown(d.RetryAfter),
		ResetAfter: shown(d.ResetAfter),
		Delay:      shown(d.Delay),
		Limit:      d.LimitIndex,
		Source:     d.Source.String(),
	}}
	if !isVerdict(limits) {
		keys := make([]string, len(limits))
		for i := range keys {
			keys[i] = key
		}
		for i, l := range adminLimits(limits) {
			line := adminLine{adminLimit: l, Key: given, From: from[0]}
			line.State = a.lineState(ctx, rule, limits, keys, i, cost)
			view.Lines = append(view.Lines, line)
		}
	}
	if c, ok := guard.Of[*guard.DenyCache](a.limiter); ok {
		if left, held := c.CachedDenial(ratelimit.Request{Name: rule.Name, Key: key, Limits: limits}); held {
			view.CachedFor = left.String()
		}
	}
	if i := leasedLine(limits); i >= 0 {
		view.Leased, view.leasedAt = a.held(rule, i, key), i
	}
	return view, nil
}

// leasedLine returns the index of the line of limits that a lease guard
// leases (the first with a Prefetch), or -1.
func leasedLine(limits []ratelimit.Limit) int {
	for i, l := range limits {
		if l.Prefetch > 0 {
			return i
		}
	}
	return -1
}

// held returns the units of line i of rule, keyed by key, that the
// limiter's lease guard holds leased unused in this process (see
// guard.Leases.Held), or 0 when it has none.
func (a *admin) held(rule *ratelimit.Rule, i int, key string) int64 {
	h, ok := guard.Of[*guard.Leases](a.limiter)
	if !ok {
		return 0
	}
	name := rule.Name
	if i < len(rule.Shared) && rule.Shared[i] != "" {
		name = rule.Shared[i]
	}
	return h.Held(name, key)
}

// keepSlot returns limits, the effective limits of rule, with rule's
// concurrency limit last if they lack one and are not an override's
// verdict: overrides change the rate limits only (see
// [ratelimit.Rule.Reserve]), so a call still takes a slot, and
// [ratelimit.Rule.Peek] counts it there.
func keepSlot(rule *ratelimit.Rule, limits []ratelimit.Limit) []ratelimit.Limit {
	var slot *ratelimit.Limit
	for i, l := range rule.Limits {
		if l.Algorithm == "concurrency" {
			slot = &rule.Limits[i]
		}
	}
	if slot == nil || len(limits) == 1 && (limits[0].Algorithm == ratelimit.Unlimited || limits[0].Algorithm == ratelimit.Block) {
		return limits
	}
	for _, l := range limits {
		if l.Algorithm == "concurrency" {
			return limits
		}
	}
	return append(limits[:len(limits):len(limits)], *slot)
}

// showLimiter writes the limiter's open circuit breakers and the problems
// of its overrides.
func (a *admin) showLimiter(w http.ResponseWriter, _ *http.Request) {
	view := struct {
		OpenCircuits map[string]string `json:"open_circuits"`
		Overrides    []string          `json:"override_problems"`
	}{OpenCircuits: map[string]string{}, Overrides: []string{}}
	if c, ok := guard.Of[*guard.Breaker](a.limiter); ok {
		for node, since := range c.Circuits() {
			view.OpenCircuits[node] = since.UTC().Format(time.RFC3339Nano)
		}
	}
	view.Overrides = a.overrideProblems()
	adminJSON(w, http.StatusOK, view)
}

// deniedView is the JSON form of the most-denied keys.
type deniedView struct {
	// Source says who counted them: "limiter" (the limiter's
	// ratelimit.OpTopDenied: for a shared backend such as Redis, every
	// process of the fleet) or "hook" (a [Denials] of this process).
	Source string        `json:"source"`
	Denied []deniedEntry `json:"denied"`
}

type deniedEntry struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	Denials int64  `json:"denials"`
	Error   int64  `json:"error"`
	kept    string // the key as the limiter keeps it: never shown
}

// topDenied returns the most-denied keys of the last minutes: the
// limiter's, when it counts them ([ratelimit.OpTopDenied]), else those of the
// Denials of [WithDenials]; ok is false when neither counts them.
func (a *admin) topDenied(ctx context.Context, n int) (deniedView, bool, error) {
	view := deniedView{Denied: []deniedEntry{}}
	if a.limiter.Abilities().Can(ratelimit.OpTopDenied) {
		res, err := a.limiter.Do(ctx, ratelimit.Op{Kind: ratelimit.OpTopDenied, Units: int64(n)})
		if err != nil {
			return view, true, err
		}
		view.Source = "limiter"
		for _, k := range res.Denied {
			view.Denied = append(view.Denied, deniedEntry{k.Name, k.Key, k.Denials, k.Error, k.Kept})
		}
		return view, true, nil
	}
	if a.denials == nil {
		return view, false, nil
	}
	view.Source = "hook"
	for _, k := range a.denials.top(n) {
		view.Denied = append(view.Denied, deniedEntry{k.Name, ratelimit.RedactKey(k.Key, k.Hashed), k.Count, k.Error, k.Key})
	}
	return view, true, nil
}

// deniedKey returns the key the limiter keeps of the key of rule name
// whose redacted form is given, when the most-denied keys of the last
// minutes list it.
func (a *admin) deniedKey(ctx context.Context, name, given string) (string, bool) {
	view, _, err := a.topDenied(ctx, denied.Slots)
	if err != nil {
		return "", false
	}
	for _, e := range view.Denied {
		if e.Name == name && e.Key == given {
			return e.kept, true
		}
	}
	return "", false
}

// listDenied writes the most-denied keys of the last minutes.
func (a *admin) listDenied(w http.ResponseWriter, r *http.Request) {
	view, ok, err := a.topDenied(r.Context(), adminPage)
	switch {
	case err != nil:
		adminFailure(w, err)
	case !ok:
		adminError(w, http.StatusNotFound, "no denials are counted: the limiter is no ratelimit.OpTopDenied; see httplimit.WithDenials")
	default:
		adminJSON(w, http.StatusOK, view)
	}
}

// resetKey resets a rule's key.
func (a *admin) resetKey(w http.ResponseWriter, r *http.Request) {
	rule, key, err := a.target(r)
	if err != nil {
		adminFailure(w, err)
		return
	}
	if err := rule.Reset(r.Context(), a.limiter, key); err != nil {
		adminFailure(w, err)
		return
	}
	adminJSON(w, http.StatusOK, struct {
		Name  string `json:"name"`
		Key   string `json:"key"`
		Reset bool   `json:"reset"`
	}{rule.Name, callkey.Named(key), true})
}

func adminLimits(limits []ratelimit.Limit) []adminLimit { return adminLimitsOf(limits, nil) }

// withShared returns limits with the shared line names of shared, when
// there is one per limit.
func withShared(limits []adminLimit, shared []string) []adminLimit {
	if len(shared) == len(limits) {
		for i := range limits {
			limits[i].Shared = shared[i]
		}
	}
	return limits
}

// isVerdict reports whether limits are an override's verdict: one
// Unlimited or Block limit.
func isVerdict(limits []ratelimit.Limit) bool {
	return len(limits) == 1 && (limits[0].Algorithm == ratelimit.Unlimited || limits[0].Algorithm == ratelimit.Block)
}

// probeKey keys the stand-in limits of lineState: no call has it.
const probeKey = "\x00httplimit admin probe"

// lineState returns the state of limit i of limits, the effective limits
// of a call of rule with keys (one per limit), for a call of cost: it
// peeks a request of limits 0 to i whose limit i is the line, under its
// key, name and index, and whose limits before it are stand-ins that
// hold far more than any line (a fixed window of 2^50-1 a day) under a
// key no call has, so the decision ([ratelimit.Peek]) describes line i
// alone. Nil for a concurrency limit (the decision counts its slots) or
// when the limiter cannot peek.
func (a *admin) lineState(ctx context.Context, rule *ratelimit.Rule, limits []ratelimit.Limit, keys []string, i int, cost int64) *adminState {
	l := limits[i]
	if l.Algorithm == "concurrency" {
		return nil
	}
	// The leased line is peeked at in the backend, which counts the units
	// of this process's lease as used, and those are added back: the line's
	// state, not what its lease would answer (see lookup's leased).
	var held int64
	if i == leasedLine(limits) {
		held = a.held(rule, i, keys[i])
		l.Prefetch = 0
	}
	req := ratelimit.Request{Name: rule.Name, Keys: make([]string, i+1), Limits: make([]ratelimit.Limit, i+1), Cost: min(cost, l.MaxCost())}
	for j := range i {
		req.Keys[j] = probeKey
		req.Limits[j] = ratelimit.Limit{Algorithm: ratelimit.FixedWindow, Period: 24 * time.Hour, Threshold: 1<<50 - 1}
	}
	req.Keys[i], req.Limits[i] = keys[i], l
	if len(rule.Shared) == len(limits) && rule.Shared[i] != "" {
		req.Shared = make([]string, i+1)
		req.Shared[i] = rule.Shared[i]
	}
	d, err := ratelimit.Peek(ctx, a.limiter, req)
	if err != nil {
		return nil
	}
	budget := l.MaxCost()
	left := d.Remaining
	if !d.Allowed {
		left = max(d.Remaining, 0)
	}
	left = min(left+held, budget)
	if held > 0 && held >= req.UnitsOf(i) { // the lease admits the call here
		d.Allowed, d.RetryAfter = true, 0
	}
	return &adminState{
		Budget:     budget,
		Used:       max(budget-left, 0),
		Remaining:  left,
		ResetAfter: shown(d.ResetAfter),
		Allowed:    d.Allowed,
		RetryAfter: shown(d.RetryAfter),
	}
}

// adminLimitsOf returns limits with their key expressions exprs, when
// there is one per limit.
func adminLimitsOf(limits []ratelimit.Limit, exprs []string) []adminLimit {
	out := make([]adminLimit, len(limits))
	for i, l := range limits {
		// The algorithm, the default's when it names none.
		alg := limitfacts.Limit{Calendar: l.Calendar, Algorithm: string(l.Algorithm)}.AlgorithmName()
		out[i] = adminLimit{
			Text:      l.String(),
			Period:    cmp.Or(l.Calendar, l.Period.String()),
			TZ:        l.TZ,
			Threshold: l.Threshold,
			Algorithm: ratelimit.Algorithm(alg),
			Burst:     l.Burst,
			Capacity:  l.Capacity,
		}
		if len(exprs) == len(limits) {
			out[i].KeyExpr = &exprs[i]
		}
	}
	return out
}

// peekLines writes the state of the keys of a rule with a key per limit:
// the key parameters key its keyed limits in order (one key keys them
// all); its other limits count every call as one.
func (a *admin) peekLines(r *http.Request, rule *ratelimit.Rule, cost int64) (any, error) {
	given := r.URL.Query()["key"]
	keys := make([]string, len(rule.Limits))
	n := 0
	for i := range keys {
		if i < len(rule.KeyExprs) && rule.KeyExprs[i] != "" {
			switch {
			case len(given) == 1:
				keys[i] = given[0]
			case n < len(given):
				keys[i] = given[n]
			}
			n++
		}
	}
	if len(given) > 1 && len(given) != n {
		return nil, &lookupError{http.StatusBadRequest, "key: want one key, or one per keyed limit (" + strconv.Itoa(n) + ")"}
	}
	typed := slices.Clone(keys)
	for i := range keys {
		if i >= len(rule.KeyExprs) || rule.KeyExprs[i] == "" {
			continue
		}
		var err error
		if keys[i], err = a.limiterKey(r.Context(), rule.Name, hashedLimit(rule, i), keys[i]); err != nil {
			return nil, err
		}
	}
	ctx := r.Context()
	limits, from := rule.Explain(ctx, a.limiter, keys...)
	var d ratelimit.Decision
	var err error
	verdict := len(limits) == 1 && (limits[0].Algorithm == ratelimit.Unlimited || limits[0].Algorithm == ratelimit.Block)
	if cost == 1 || verdict {
		d, err = rule.Peek(ctx, a.limiter, keys...)
	} else {
		d, err = ratelimit.Peek(ctx, a.limiter, ratelimit.Request{Name: rule.Name, Keys: keys, Cost: cost, Limits: limits, Shared: rule.Shared})
	}
	if err != nil {
		return nil, err
	}
	view := linesView{Name: rule.Name, Cost: cost, Lines: []adminLine{}, Decision: adminDecision{
		Allowed:    d.Allowed,
		Remaining:  d.Remaining,
		RetryAfter: shown(d.RetryAfter),
		ResetAfter: shown(d.ResetAfter),
		Delay:      shown(d.Delay),
		Limit:      d.LimitIndex,
		Source:     d.Source.String(),
	}}
	if verdict {
		view.Verdict, view.From = string(limits[0].Algorithm), from[0]
		limits, from = rule.Limits, nil
	}
	for i, l := range withShared(adminLimitsOf(limits, rule.KeyExprs), rule.Shared) {
		line := adminLine{adminLimit: l, Key: shownKey(typed[i], keys[i]), From: "directive"}
		if i < len(from) {
			line.From = from[i]
		}
		if !verdict {
			line.State = a.lineState(ctx, rule, limits, keys, i, cost)
		}
		view.Lines = append(view.Lines, line)
	}
	return view, nil
}

// adminFailure writes err: 400 for a request no limiter could decide, 501
// for a limiter that cannot peek or reset, else (the backend failed) 503.
func adminFailure(w http.ResponseWriter, err error) {
	adminError(w, failureStatus(err), err.Error())
}

// failureStatus returns the HTTP status of err (see adminFailure).
func failureStatus(err error) int {
	var le *lookupError
	switch {
	case errors.As(err, &le):
		return le.status
	case errors.Is(err, ratelimit.ErrInvalidLimit):
		return http.StatusBadRequest
	case errors.Is(err, errors.ErrUnsupported):
		return http.StatusNotImplemented
	}
	return http.StatusServiceUnavailable
}

func adminMethods(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	adminError(w, http.StatusMethodNotAllowed, "method not allowed")
}

func adminError(w http.ResponseWriter, status int, msg string) {
	adminJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

func adminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write is the client's gone
}

// shown writes d as the admin view shows a wait: rounded up, to the
// millisecond under a second, to the tenth of a second under ten seconds,
// else to the second (51s, 74h21m13s, not 50.942722s), so that a caller
// who waits what it reads is never early; ParseDuration reads it back.
func shown(d time.Duration) string {
	unit := time.Second
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		unit = time.Millisecond
	case d < 10*time.Second:
		unit = 100 * time.Millisecond
	}
	if r := d % unit; r != 0 {
		d += unit - r
	}
	return d.String()
}
