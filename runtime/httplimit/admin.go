package httplimit

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"slices"
	"strconv"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
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
//	                             overrides) and its wait, onerror and shadow options
//	GET .../key?name=N&key=K[&cost=C]
//	                             the state of rule N's key K: its effective limits (the
//	                             key's or its tier's own too, see [ratelimit.KeyOverrides]) and
//	                             what a call of cost C (default 1) would be told now,
//	                             from [ratelimit.Peek], charging nothing
//	POST or DELETE .../key?name=N&key=K
//	                             [ratelimit.Reset] of rule N's key K, only with [WithAdminReset]
//
// The handler answers on any path ending in /rules or /key, so it can be
// mounted under any prefix. Only the names of rules are looked up; a key is
// shown bounded, as the limiters keep it (see [ratelimit.Request.Key]). It reveals
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
	a := &admin{limiter: limiter, rules: rules, byName: make(map[string]*ratelimit.Rule, len(rules))}
	for _, r := range rules {
		if _, ok := a.byName[r.Name]; !ok {
			a.byName[r.Name] = r
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
}

// adminLimit is the JSON form of a [ratelimit.Limit].
type adminLimit struct {
	Text      string              `json:"text"`
	Period    string              `json:"period"`
	Threshold int64               `json:"threshold"`
	Algorithm ratelimit.Algorithm `json:"algorithm"`
	Burst     int64               `json:"burst,omitempty"`
	Capacity  int64               `json:"capacity,omitempty"`
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

type adminDecision struct {
	Allowed    bool   `json:"allowed"`
	Remaining  int64  `json:"remaining"`
	RetryAfter string `json:"retry_after"`
	ResetAfter string `json:"reset_after"`
	Delay      string `json:"delay"`
	Limit      int    `json:"limit"`
}

func (a *admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	default:
		adminError(w, http.StatusNotFound, "not found: want .../rules or .../key")
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
		eff := rule.EffectiveLimits(r.Context(), a.limiter, "")
		page.Rules = append(page.Rules, adminRule{
			Name:       rule.Name,
			Limits:     adminLimits(rule.Limits),
			Effective:  adminLimits(eff),
			Overridden: !slices.Equal(eff, rule.Limits),
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

// target returns the rule and key a request of .../key names, or writes
// the error.
func (a *admin) target(w http.ResponseWriter, r *http.Request) (*ratelimit.Rule, string, bool) {
	q := r.URL.Query()
	rule, ok := a.byName[q.Get("name")]
	if !ok {
		adminError(w, http.StatusNotFound, "no rule of that name")
		return nil, "", false
	}
	return rule, q.Get("key"), true
}

// peek writes the state of a rule's key.
func (a *admin) peek(w http.ResponseWriter, r *http.Request) {
	rule, key, ok := a.target(w, r)
	if !ok {
		return
	}
	cost := int64(1)
	if v := r.URL.Query().Get("cost"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			adminError(w, http.StatusBadRequest, "cost: want a positive whole number")
			return
		}
		cost = n
	}
	limits := rule.EffectiveLimits(r.Context(), a.limiter, key)
	d, err := ratelimit.Peek(r.Context(), a.limiter, ratelimit.Request{Name: rule.Name, Key: key, Cost: cost, Limits: limits})
	if err != nil {
		adminFailure(w, err)
		return
	}
	adminJSON(w, http.StatusOK, struct {
		Name     string        `json:"name"`
		Key      string        `json:"key"`
		Cost     int64         `json:"cost"`
		Limits   []adminLimit  `json:"limits"`
		Decision adminDecision `json:"decision"`
	}{rule.Name, callkey.Bound(key), cost, adminLimits(limits), adminDecision{
		Allowed:    d.Allowed,
		Remaining:  d.Remaining,
		RetryAfter: d.RetryAfter.String(),
		ResetAfter: d.ResetAfter.String(),
		Delay:      d.Delay.String(),
		Limit:      d.LimitIndex,
	}})
}

// resetKey resets a rule's key.
func (a *admin) resetKey(w http.ResponseWriter, r *http.Request) {
	rule, key, ok := a.target(w, r)
	if !ok {
		return
	}
	if err := ratelimit.Reset(r.Context(), a.limiter, rule.Name, key); err != nil {
		adminFailure(w, err)
		return
	}
	adminJSON(w, http.StatusOK, struct {
		Name  string `json:"name"`
		Key   string `json:"key"`
		Reset bool   `json:"reset"`
	}{rule.Name, callkey.Bound(key), true})
}

func adminLimits(limits []ratelimit.Limit) []adminLimit {
	out := make([]adminLimit, len(limits))
	for i, l := range limits {
		out[i] = adminLimit{
			Text:      l.String(),
			Period:    l.Period.String(),
			Threshold: l.Threshold,
			Algorithm: cmp.Or(l.Algorithm, ratelimit.SlidingLog),
			Burst:     l.Burst,
			Capacity:  l.Capacity,
		}
	}
	return out
}

// adminFailure writes err: 400 for a request no limiter could decide, 501
// for a limiter that cannot peek or reset, else (the backend failed) 503.
func adminFailure(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ratelimit.ErrInvalidLimit):
		adminError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, errors.ErrUnsupported):
		adminError(w, http.StatusNotImplemented, err.Error())
	default:
		adminError(w, http.StatusServiceUnavailable, err.Error())
	}
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
