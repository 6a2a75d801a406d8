package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// The header fields of draft-ietf-httpapi-ratelimit-headers (draft 11).
const (
	// HeaderRateLimitPolicy advertises a quota policy:
	//
	//	RateLimit-Policy: "name";q=<threshold>;w=<period in seconds>
	HeaderRateLimitPolicy = "RateLimit-Policy"
	// HeaderRateLimit advertises what is left of it now:
	//
	//	RateLimit: "name";r=<remaining>;t=<seconds>
	HeaderRateLimit = "RateLimit"
)

// WriteError writes the response for a call [ratelimit.Rule.Check] denied and
// returns true when err is (or wraps) a [*ratelimit.LimitError]; for any other error
// it writes nothing and returns false, so the caller can answer it its own
// way:
//
//	if err := rule.Check(ctx, limiter, 1, key); err != nil {
//		if !ratelimit.WriteError(w, err) {
//			http.Error(w, "unavailable", http.StatusServiceUnavailable)
//		}
//		return
//	}
//
// The response is 429 Too Many Requests with a short text/plain body
// ([Text]) and
//
//	Retry-After: <seconds>
//	RateLimit-Policy: "<name>";q=<threshold>;w=<period seconds>
//	RateLimit: "<name>";r=<remaining>;t=<seconds>
//
// where the seconds of Retry-After and t are the error's RetryAfter rounded
// up, at least 1, and w is the period rounded up, at least 1. The limit of
// a rule with a key per limit that denied the call is named
// "<name>/<key expression>" (see [SetAdmissionHeaders]), never with the
// key's value. The fields
// follow draft-ietf-httpapi-ratelimit-headers-11; the RateLimit fields are
// added to any already set (one item per policy), Retry-After is replaced.
// [WriteErrorAs] writes the body in another format, such as [JSON];
// [SetErrorHeaders] sets the fields alone.
func WriteError(w http.ResponseWriter, err error) bool {
	return WriteErrorAs(w, err, Text)
}

// ErrorFormat renders the body of the 429 response to a denial: its
// Content-Type and its bytes. [Text] and [JSON] are ErrorFormats; a
// function of the API's own error format is one too.
type ErrorFormat func(le *ratelimit.LimitError) (contentType string, body []byte)

// WriteErrorAs is [WriteError] with the body that format renders: the same
// status and header fields, the Content-Type format returns and
// X-Content-Type-Options: nosniff. It returns false, writing nothing, when
// err is not a denial.
func WriteErrorAs(w http.ResponseWriter, err error, format ErrorFormat) bool {
	var le *ratelimit.LimitError
	if !errors.As(err, &le) {
		return false
	}
	h := w.Header()
	setErrorHeaders(h, le)
	contentType, body := format(le)
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
	return true
}

// SetErrorHeaders adds to h the fields [WriteError] sets for a denial
// (Retry-After, RateLimit-Policy and RateLimit; not Content-Type), and
// returns true, when err is (or wraps) a [*ratelimit.LimitError]; for any
// other error it sets nothing and returns false. It is for a handler that
// writes the status and body of its own response.
func SetErrorHeaders(h http.Header, err error) bool {
	var le *ratelimit.LimitError
	if !errors.As(err, &le) {
		return false
	}
	setErrorHeaders(h, le)
	return true
}

// setErrorHeaders sets the fields of the denial le on h.
func setErrorHeaders(h http.Header, le *ratelimit.LimitError) {
	retry := retrySeconds(le)
	h.Set("Retry-After", strconv.FormatInt(retry, 10))
	name := policyName(le.Name, le.KeyExpr)
	addPolicy(h, name, le.Limit)
	h.Add(HeaderRateLimit, fmt.Sprintf("%s;r=%d;t=%d", sfString(name), max(le.Remaining, 0), retry))
}

// retrySeconds returns the Retry-After of le: its RetryAfter in seconds,
// rounded up, at least 1.
func retrySeconds(le *ratelimit.LimitError) int64 { return max(ceilSeconds(le.RetryAfter), 1) }

// Text is the [ErrorFormat] of [WriteError]: text/plain, as
//
//	Too Many Requests: retry after 2 s
//
// naming the cause of a denial that is not a used-up limit, and a shared
// line's name (see [ratelimit.LimitError.Cause]):
//
//	Too Many Requests: blocked by an override; retry after 60 s
func Text(le *ratelimit.LimitError) (string, []byte) {
	return "text/plain; charset=utf-8", append([]byte(message(le)), '\n')
}

// causeText says each cause but a used-up limit's (see
// ratelimit.LimitError.Cause) in Text's line: built once, not per 429.
var causeText = map[string]string{
	"blocked":     "blocked by an override; ",
	"cooldown":    "cooling down, an upstream asked for a pause; ",
	"concurrency": "too many calls in flight; ",
	"queue":       "waiting its turn behind earlier calls; ",
	"shed":        "shed, the limiter is busy; ",
}

// message is Text's line.
func message(le *ratelimit.LimitError) string {
	why := causeText[le.Cause()]
	if why == "" && le.Line != "" {
		why = "the shared line " + le.Line + " is used up; "
	}
	return fmt.Sprintf("Too Many Requests: %sretry after %d s", why, retrySeconds(le))
}

// ErrorBody is the body that [JSON] writes.
type ErrorBody struct {
	// Error is "rate_limited".
	Error string `json:"error"`
	// Message is Text's line, without its newline.
	Message string `json:"message"`
	// Policy names the limit that denied the call, as the RateLimit field
	// does: the rule's name, "/<key expression>" for a rule with a key
	// per limit; never the key's value.
	Policy string `json:"policy"`
	// RetryAfter is Retry-After's seconds.
	RetryAfter int64 `json:"retry_after"`
	// Remaining is what the limit has left, at least 0.
	Remaining int64 `json:"remaining"`
	// Cause says why the call was denied: "limit", "blocked",
	// "cooldown", "concurrency", "queue" or "shed" (see
	// [ratelimit.LimitError.Cause]).
	Cause string `json:"cause"`
	// Line names the shared line that denied the call, if one did.
	Line string `json:"line,omitempty"`
}

// JSON is an [ErrorFormat] that writes an [ErrorBody] as application/json:
//
//	{"error":"rate_limited","message":"Too Many Requests: retry after 2 s","policy":"svc.Get","retry_after":2,"remaining":0,"cause":"limit"}
func JSON(le *ratelimit.LimitError) (string, []byte) {
	body, _ := json.Marshal(ErrorBody{
		Error: "rate_limited", Message: message(le),
		Policy: policyName(le.Name, le.KeyExpr), RetryAfter: retrySeconds(le), Remaining: max(le.Remaining, 0),
		Cause: le.Cause(), Line: le.Line,
	})
	return "application/json", append(body, '\n')
}

// SetHeaders adds to h the RateLimit-Policy and RateLimit fields that
// describe the limit l of the calls named name after decision d, such as
// on an admitted response:
//
//	RateLimit-Policy: "<name>";q=<threshold>;w=<period seconds>
//	RateLimit: "<name>";r=<remaining>;t=<seconds>
//
// For an admission t is d.ResetAfter (when the whole quota is back)
// rounded up; for a denial it is d.RetryAfter rounded up, at least 1, as
// [WriteError] writes. Pass the limit d describes: l = limits[d.LimitIndex].
func SetHeaders(h http.Header, d ratelimit.Decision, l ratelimit.Limit, name string) {
	t := ceilSeconds(d.ResetAfter)
	if !d.Allowed {
		t = max(ceilSeconds(d.RetryAfter), 1)
	}
	addPolicy(h, name, l)
	h.Add(HeaderRateLimit, fmt.Sprintf("%s;r=%d;t=%d", sfString(name), max(d.Remaining, 0), t))
}

// SetAdmissionHeaders adds to h the RateLimit-Policy and RateLimit fields
// of [SetHeaders] that describe the admission a, such as the one a
// context from [ratelimit.WithAdmission] recorded for a decorated call:
//
//	ctx, admission := ratelimit.WithAdmission(r.Context())
//	item, err := store.Get(ctx, id)
//	if httplimit.WriteError(w, err) {
//		return
//	}
//	...
//	httplimit.SetAdmissionHeaders(w.Header(), admission())
//
// It adds nothing when a is not Decided (no call was recorded, or the rule
// is a shadow one). Set the fields before the response's header is
// written.
//
// An admission of a call with a key per limit (see Keys in package ratelimit)
// lists every limit's policy in RateLimit-Policy, as the draft allows, each
// named by the rule's name and its key expression, "<name>/<expression>"
// (a limit that counts every call as one by the name alone; a second limit
// of the same expression gets "#<index>" after it), and the one with the
// fewest units left in RateLimit:
//
//	RateLimit-Policy: "svc.Post/user";q=10;w=1, "svc.Post";q=1000;w=3600
//	RateLimit: "svc.Post/user";r=7;t=1
func SetAdmissionHeaders(h http.Header, a ratelimit.Admission) {
	if !a.Decided {
		return
	}
	if len(a.Limits) == 0 || len(a.Limits) != len(a.KeyExprs) {
		SetHeaders(h, a.Decision, a.Limit, a.Name)
		return
	}
	names := make([]string, len(a.Limits))
	for i, expr := range a.KeyExprs {
		names[i] = policyName(a.Name, expr)
		for j := range i {
			if names[j] == names[i] {
				names[i] += "#" + strconv.Itoa(i)
				break
			}
		}
	}
	i := a.Decision.LimitIndex
	if i < 0 || i >= len(a.Limits) {
		i = 0
	}
	for j, l := range a.Limits {
		if j == i {
			SetHeaders(h, a.Decision, l, names[j])
		} else {
			addPolicy(h, names[j], l)
		}
	}
}

// policyName is the name of the policy of a limit with key expression
// expr of the rule named name: "<name>/<expr>", or name for a limit that
// counts every call as one (and for the limits of a call with one key).
func policyName(name, expr string) string {
	if expr == "" {
		return name
	}
	return name + "/" + expr
}

// The X-RateLimit header fields that many clients read, as GitHub's API
// sends them. Unlike the IETF fields they have room for one limit.
const (
	// HeaderXRateLimitLimit is the limit's threshold.
	HeaderXRateLimitLimit = "X-RateLimit-Limit"
	// HeaderXRateLimitRemaining is how many units the limit admits now.
	HeaderXRateLimitRemaining = "X-RateLimit-Remaining"
	// HeaderXRateLimitReset is when the limit is fully available again,
	// in Unix seconds.
	HeaderXRateLimitReset = "X-RateLimit-Reset"
)

// SetXRateLimit sets on h the X-RateLimit fields that describe the limit
// l with remaining units left now, fully available again after
// resetAfter:
//
//	X-RateLimit-Limit: <threshold>
//	X-RateLimit-Remaining: <remaining, at least 0>
//	X-RateLimit-Reset: <Unix time of now+resetAfter, in seconds, rounded up>
//
// replacing any already set. For an admission pass the [ratelimit.Admission]'s
// Limit, Decision.Remaining and Decision.ResetAfter; for a denial, the
// [*ratelimit.LimitError]'s Limit, Remaining and ResetAfter.
func SetXRateLimit(h http.Header, l ratelimit.Limit, remaining int64, resetAfter time.Duration) {
	reset := time.Now().Add(max(resetAfter, 0))
	sec := reset.Unix()
	if reset.Nanosecond() > 0 {
		sec++
	}
	h.Set(HeaderXRateLimitLimit, strconv.FormatInt(l.Threshold, 10))
	h.Set(HeaderXRateLimitRemaining, strconv.FormatInt(max(remaining, 0), 10))
	h.Set(HeaderXRateLimitReset, strconv.FormatInt(sec, 10))
}

func addPolicy(h http.Header, name string, l ratelimit.Limit) {
	h.Add(HeaderRateLimitPolicy, fmt.Sprintf("%s;q=%d;w=%d", sfString(name), l.Threshold, max(ceilSeconds(window(l)), 1)))
}

// window returns the length of l's window: its Period, or the length of
// the calendar window running now (a day of 23 or 25 hours, a month).
func window(l ratelimit.Limit) time.Duration {
	c, ok := limitfacts.Limit{Calendar: l.Calendar, TZ: l.TZ}.CalendarOf()
	if !ok {
		return l.Period
	}
	start, end := c.Window(time.Now())
	return end.Sub(start)
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// sfString renders s as a Structured Field String (RFC 9651): quoted, with
// '"' and '\' escaped. Bytes a String cannot hold (controls and non-ASCII)
// are percent-encoded, and so is '%', so the encoding can be undone.
func sfString(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e || c == '%':
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
