package httplimit

import (
	"cmp"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// The page for on-call at the admin view's root (a path ending in "/"):
// one server-rendered HTML page, with no script and no external asset,
// that shows the rules and their lines, the open circuit breakers, the
// overrides' problems, the most-denied keys (the fleet's, from a
// ratelimit.OpTopDenied) and a lookup form that explains why a key is
// limited (.../key's answer, as prose and a table of its lines).

// pageData is what the page shows.
type pageData struct {
	Now       string
	Rules     []pageRule
	Circuits  []pageCircuit
	Problems  []string
	Denied    deniedView
	DeniedOK  bool
	DeniedErr string
	Names     []string
	Query     pageQuery
	Lookup    *pageLookup
}

type pageRule struct {
	Name       string
	Lines      []adminLimit
	Overridden bool
	Effective  string
}

type pageCircuit struct{ Node, Since string }

// pageQuery is the lookup form's query: a key input per keyed line of
// the rule asked about (one when it has a key for all), labelled with its
// key expression.
type pageQuery struct {
	Name, Cost string
	Keys       []pageKey
}

type pageKey struct{ Label, Value string }

// pageLookup is the answer to the lookup form.
type pageLookup struct {
	Name     string
	Err      string
	Allowed  bool
	Why      string
	Lines    []adminLine
	Denier   int // the line that decides, as Decision.Limit
	Retry    string
	Leased   int64 // the units of the leased line leased to this process unused (prefetch=)
	LeasedAt int   // the leased line's index
}

// page writes the on-call page.
func (a *admin) page(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := pageData{Now: time.Now().UTC().Format(time.RFC3339), Circuits: []pageCircuit{}}
	for _, rule := range a.rules {
		eff, from := rule.Explain(ctx, a.limiter)
		texts := make([]string, len(eff))
		for i, l := range eff {
			texts[i] = l.String()
		}
		d.Rules = append(d.Rules, pageRule{
			Name:       rule.Name,
			Lines:      withShared(adminLimitsOf(rule.Limits, rule.KeyExprs), rule.Shared),
			Overridden: overridden(from),
			Effective:  strings.Join(texts, ", "),
		})
		d.Names = append(d.Names, rule.Name)
	}
	if c, ok := guard.Of[*guard.Breaker](a.limiter); ok {
		for node, since := range c.Circuits() {
			d.Circuits = append(d.Circuits, pageCircuit{node, since.UTC().Format(time.RFC3339)})
		}
		slices.SortFunc(d.Circuits, func(x, y pageCircuit) int { return cmp.Compare(x.Node, y.Node) })
	}
	d.Problems = a.overrideProblems()
	var err error
	d.Denied, d.DeniedOK, err = a.topDenied(ctx, adminPage)
	if err != nil {
		d.DeniedErr = err.Error()
	}
	q := r.URL.Query()
	d.Query = pageQuery{Name: q.Get("name"), Cost: q.Get("cost")}
	given := q["key"]
	labels := []string{"key"}
	if rule, ok := a.byName[d.Query.Name]; ok && rule.KeyExprs != nil {
		labels = labels[:0]
		for _, e := range rule.KeyExprs {
			if e != "" {
				labels = append(labels, e)
			}
		}
	}
	for i := range max(len(labels), len(given), 1) {
		k := pageKey{Label: "key"}
		if i < len(labels) {
			k.Label = labels[i]
		}
		if i < len(given) {
			k.Value = given[i]
		}
		d.Query.Keys = append(d.Query.Keys, k)
	}
	if d.Query.Name != "" {
		d.Lookup = a.explain(r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	if err := pageTemplate.Execute(w, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// explain answers the lookup form: .../key's answer for its query, and
// why the call would be denied, in a sentence.
func (a *admin) explain(r *http.Request) *pageLookup {
	out := &pageLookup{Name: r.URL.Query().Get("name"), Denier: -1}
	view, err := a.lookup(r)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	var d adminDecision
	verdict, from := "", ""
	switch v := view.(type) {
	case keyView:
		out.Lines, d, from, out.Leased, out.LeasedAt = v.Lines, v.Decision, v.From, v.Leased, v.leasedAt
		if len(v.Limits) == 1 && (v.Limits[0].Algorithm == ratelimit.Unlimited || v.Limits[0].Algorithm == ratelimit.Block) {
			verdict = string(v.Limits[0].Algorithm)
		}
	case linesView:
		out.Lines, d, verdict, from = v.Lines, v.Decision, v.Verdict, v.From
	}
	out.Allowed, out.Retry = d.Allowed, d.RetryAfter
	switch {
	case verdict == string(ratelimit.Block):
		out.Why = "Blocked by an override (" + from + "): every call is denied until the override is lifted."
	case verdict == string(ratelimit.Unlimited):
		out.Why = "Exempt by an override (" + from + "): no limit applies."
	case d.Allowed:
		out.Why = "Allowed now."
	case d.Limit >= 0 && d.Limit < len(out.Lines):
		l := out.Lines[d.Limit]
		out.Denier = d.Limit
		what := "the line " + l.Text
		if l.Shared != "" {
			what = "the shared line " + l.Shared + " (" + l.Text + ")"
		}
		key := "for every call"
		if l.Key != "" {
			key = "for key " + l.Key
			if l.KeyExpr != nil && *l.KeyExpr != "" {
				key += " (" + *l.KeyExpr + ")"
			}
		}
		out.Why = "Denied by " + what + ", " + key + ", limit from " + l.From + ": retry after " + d.RetryAfter + "."
	default:
		out.Why = "Denied: retry after " + d.RetryAfter + "."
	}
	return out
}

// overrideProblems returns the fields of the limiter's overrides that
// cannot be used.
func (a *admin) overrideProblems() []string {
	out := []string{}
	if c := a.limiter.Abilities().Config; c != nil && c.Overrides != nil {
		if p, ok := c.Overrides.(interface {
			Problems() []*ratelimit.FieldError
		}); ok {
			for _, fe := range p.Problems() {
				out = append(out, fe.Error())
			}
		}
	}
	return out
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
}).Parse(pageHTML))

const pageHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rate limits: on-call</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
h2 { font-size: 1.1em; margin: 1.4em 0 .4em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f0f0f2; }
code { font: 12px ui-monospace, monospace; }
.ok { color: #137333; } .bad { color: #b3261e; font-weight: 600; }
.why { padding: .6em .8em; margin: .6em 0; border-left: 4px solid #137333; background: #fff; }
.why.denied { border-color: #b3261e; }
tr.denier td { background: #fdecea; }
form { background: #fff; border: 1px solid #ddd; padding: .6em; display: inline-block; }
input, select, button { font: inherit; margin-right: .5em; }
.muted { color: #666; }
</style>
</head>
<body>
<h1>Rate limits</h1>
<p class="muted">As of {{.Now}}. This page reveals keys and their state: it is for operators only.</p>

<h2 id="lookup">Why is a key limited?</h2>
<form method="get" action="">
<label>Rule <select name="name">{{range .Names}}<option{{if eq . $.Query.Name}} selected{{end}}>{{.}}</option>{{end}}</select></label>
{{range .Query.Keys}}<label>{{.Label}} <input name="key" value="{{.Value}}" size="24" placeholder="the raw key"></label>{{end}}
<label>Cost <input name="cost" value="{{.Query.Cost}}" size="5" placeholder="1"></label>
<button type="submit">Explain</button>
</form>
{{with .Lookup}}
{{if .Err}}<p class="bad" id="lookup-error">{{.Name}}: {{.Err}}</p>{{else}}
<div class="why{{if not .Allowed}} denied{{end}}" id="verdict"><strong>{{.Name}}</strong>: {{.Why}}</div>
<table id="lookup-lines">
<tr><th>#</th><th>line</th><th>key</th><th>from</th><th>budget</th><th>used</th><th>left</th><th>resets in</th><th>this call</th></tr>
{{range $i, $l := .Lines}}<tr{{if eq $i $.Lookup.Denier}} class="denier"{{end}}>
<td>{{$i}}</td><td>{{$l.Text}}{{if $l.Shared}} <span class="muted">shared {{$l.Shared}}</span>{{end}}</td>
<td><code>{{$l.Key}}</code>{{with deref $l.KeyExpr}} <span class="muted">({{.}})</span>{{end}}</td><td>{{$l.From}}</td>
{{with $l.State}}<td>{{.Budget}}</td><td>{{.Used}}</td><td>{{.Remaining}}</td><td>{{.ResetAfter}}</td><td>{{if .Allowed}}<span class="ok">fits</span>{{else}}<span class="bad">denied, retry in {{.RetryAfter}}</span>{{end}}</td>{{else}}<td colspan="5" class="muted">no state</td>{{end}}
</tr>{{end}}
</table>
{{if .Leased}}<p id="leased">Line {{.LeasedAt}} holds {{.Leased}} units leased to this process and not yet used (<code>prefetch=</code>): this process admits its calls from them (counted in "left"), and gives back what it does not use when the lease ends.</p>{{end}}
{{end}}
{{end}}

<h2 id="breakers">Open circuit breakers</h2>
{{if .Circuits}}<table><tr><th>node</th><th>open since</th></tr>{{range .Circuits}}<tr><td><code>{{.Node}}</code></td><td>{{.Since}}</td></tr>{{end}}</table>
{{else}}<p class="ok">None: every call is decided by the backend.</p>{{end}}

<h2 id="problems">Override problems</h2>
{{if .Problems}}<ul>{{range .Problems}}<li class="bad">{{.}}</li>{{end}}</ul>
{{else}}<p class="ok">None.</p>{{end}}

<h2 id="denied">Most-denied keys, last five minutes</h2>
{{if .DeniedErr}}<p class="bad">{{.DeniedErr}}</p>
{{else if not .DeniedOK}}<p class="muted">Not counted: the limiter counts no denials, and no httplimit.Denials is given.</p>
{{else if .Denied.Denied}}<p class="muted">Counted by the {{.Denied.Source}}{{if eq .Denied.Source "limiter"}} (for a shared backend, every replica){{end}}; keys redacted (sha256: and 12 hex digits of the key's SHA-256); each links to why it is limited.</p>
<table><tr><th>rule</th><th>key</th><th>denials</th><th>± error</th></tr>
{{range .Denied.Denied}}<tr><td>{{.Name}}</td><td><a href="?name={{.Name}}&amp;key={{.Key}}#lookup"><code>{{.Key}}</code></a></td><td>{{.Denials}}</td><td>{{.Error}}</td></tr>{{end}}</table>
{{else}}<p class="ok">No denials.</p>{{end}}

<h2 id="rules">Rules</h2>
<table>
<tr><th>rule</th><th>lines (directive)</th><th>effective now</th></tr>
{{range .Rules}}<tr><td><code>{{.Name}}</code></td><td>{{range $i, $l := .Lines}}{{if $i}}<br>{{end}}{{$l.Text}}{{with deref $l.KeyExpr}} per <code>{{.}}</code>{{end}}{{if $l.Shared}} <span class="muted">shared {{$l.Shared}}</span>{{end}}{{end}}</td>
<td>{{if .Overridden}}<span class="bad">overridden:</span> {{end}}{{.Effective}}</td></tr>{{end}}
</table>
</body>
</html>
`
