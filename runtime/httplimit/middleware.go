package httplimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// KeyFunc returns the per-call key of an HTTP request, such as the
// client's address or an API key; see [ratelimit.Request.Key]. An error makes
// [Middleware] answer 400 Bad Request (without the error's text).
type KeyFunc func(*http.Request) (string, error)

// Middleware limits the requests of an http.Handler, for routes that are
// not Go methods a generated decorator could wrap: each request is one
// call of rule with cost 1 and the key that key returns (one shared key
// when key is nil), checked with [ratelimit.Rule.Admit], so the rule's Wait, Shadow
// and OnError apply as they do to methods.
//
// A denied request gets [WriteError]'s 429 response (or what the handler
// of [WithDenyHandler] writes) and does not reach next. A request the
// limiter could not decide goes to next under [ratelimit.FailOpen], is decided by
// the local fallback under [ratelimit.FailLocal], and gets 503 Service Unavailable
// under [ratelimit.FailClosed]; other errors (an invalid rule, a request whose
// context ended) get 500 and 503. An admitted request reaches next with
// the RateLimit-Policy and RateLimit fields of [SetHeaders] set (and the
// X-RateLimit fields with [WithXRateLimit]), except under a shadow rule,
// which clients should not see. Requests that the function of [WithSkip]
// picks reach next unchecked.
//
// A rule with a concurrency limit (see [ratelimit.Rule.Reserve]) holds
// one of its slots for each request while next serves it, panics
// included: a request that finds none free is denied as above (429, its
// LimitError's Limit the concurrency limit), and an admitted one gets no
// RateLimit fields.
func Middleware(limiter ratelimit.Limiter, rule *ratelimit.Rule, key KeyFunc, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	c := middlewareConfig{deny: writeDenial}
	for _, o := range opts {
		o(&c)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.skip != nil && c.skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			k := ""
			if key != nil {
				var err error
				if k, err = key(r); err != nil {
					http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
					return
				}
			}
			if holdsSlot(rule) {
				res, err := rule.Reserve(r.Context(), limiter, 1, k)
				if err != nil {
					c.refuse(w, r, err)
					return
				}
				defer res.Release(r.Context())
				next.ServeHTTP(w, r)
				return
			}
			a, err := rule.Admit(r.Context(), limiter, 1, k)
			if err != nil {
				c.refuse(w, r, err)
				return
			}
			if a.Decided {
				SetHeaders(w.Header(), a.Decision, a.Limit, rule.Name)
				if c.xRateLimit {
					SetXRateLimit(w.Header(), a.Limit, a.Decision.Remaining, a.Decision.ResetAfter)
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// MiddlewareOption configures [Middleware].
type MiddlewareOption func(*middlewareConfig)

type middlewareConfig struct {
	deny       func(http.ResponseWriter, *http.Request, *ratelimit.LimitError)
	skip       func(*http.Request) bool
	xRateLimit bool
}

// WithDenyHandler makes [Middleware] answer a denied request with deny,
// given the denial, instead of [WriteError]'s 429 Too Many Requests, such
// as to answer with another status. deny writes the whole response: call
// [SetErrorHeaders] from it to keep the default fields, or [WriteErrorAs]
// to keep the status too. [WithErrorFormat] changes the body alone.
func WithDenyHandler(deny func(w http.ResponseWriter, r *http.Request, err *ratelimit.LimitError)) MiddlewareOption {
	return func(c *middlewareConfig) {
		if deny != nil {
			c.deny = deny
		}
	}
}

// WithErrorFormat makes [Middleware] answer a denied request with
// [WriteErrorAs] in format, such as [JSON]: the same status and fields as
// [WriteError]'s, the body in the API's format. [WithDenyHandler] replaces
// the whole response instead.
func WithErrorFormat(format ErrorFormat) MiddlewareOption {
	return func(c *middlewareConfig) {
		if format != nil {
			c.deny = func(w http.ResponseWriter, _ *http.Request, err *ratelimit.LimitError) { WriteErrorAs(w, err, format) }
		}
	}
}

// WithSkip makes [Middleware] pass the requests for which skip returns
// true to the next handler unchecked: they are neither counted nor
// limited, and get no RateLimit fields (such as health checks, or clients
// on an allowlist).
func WithSkip(skip func(r *http.Request) bool) MiddlewareOption {
	return func(c *middlewareConfig) { c.skip = skip }
}

// WithXRateLimit makes [Middleware] also set the X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset fields ([SetXRateLimit]),
// which many clients read, beside the IETF RateLimit fields, on admitted
// and denied responses.
func WithXRateLimit() MiddlewareOption {
	return func(c *middlewareConfig) { c.xRateLimit = true }
}

// writeDenial is the default deny handler.
func writeDenial(w http.ResponseWriter, _ *http.Request, err *ratelimit.LimitError) {
	WriteError(w, err)
}

// refuse answers a request that Admit did not admit because of err.
func (c *middlewareConfig) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var le *ratelimit.LimitError
	if errors.As(err, &le) {
		if c.xRateLimit {
			SetXRateLimit(w.Header(), le.Limit, le.Remaining, le.ResetAfter)
		}
		c.deny(w, r, le)
		return
	}
	code := http.StatusInternalServerError
	if errors.Is(err, ratelimit.ErrBackend) || r.Context().Err() != nil {
		code = http.StatusServiceUnavailable
	}
	http.Error(w, http.StatusText(code), code)
}

// ClientIP returns a KeyFunc that keys requests by the client's IP address.
//
// Without trusted proxies it is the address of the peer (the request's
// RemoteAddr), which a client cannot forge. When the peer is one of
// trustedProxies, the X-Forwarded-For header (all its fields, in order) is
// read from right to left: each entry was appended by the proxy on its
// right, so the walk steps over entries while they are trusted proxies and
// stops at the first that is not: that is the client. Entries further left
// were written by the client and are never believed. If every entry is a
// trusted proxy, the leftmost is the key; if an entry reached by the walk
// is not an IP address (a misconfigured proxy), the trusted proxy that
// forwarded it is. IPv4-mapped IPv6 addresses count as IPv4 and zones are
// dropped. Forwarded (RFC 7239) is not read.
//
// An IPv6 client usually controls a whole /64; a KeyFunc that masks the
// address (netip.Addr.Prefix) limits it as one.
func ClientIP(trustedProxies ...netip.Prefix) KeyFunc {
	trusted := make([]netip.Prefix, len(trustedProxies))
	for i, p := range trustedProxies {
		trusted[i] = p.Masked()
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		ip, err := parseIP(r.RemoteAddr)
		if err != nil {
			return "", fmt.Errorf("ratelimit: remote address %q: %w", r.RemoteAddr, err)
		}
		if !isTrusted(ip) {
			return ip.String(), nil
		}
		hops := r.Header.Values("X-Forwarded-For")
		for i := len(hops) - 1; i >= 0; i-- {
			entries := strings.Split(hops[i], ",")
			for j := len(entries) - 1; j >= 0; j-- {
				hop, err := parseIP(strings.TrimSpace(entries[j]))
				if err != nil {
					return ip.String(), nil
				}
				ip = hop
				if !isTrusted(ip) {
					return ip.String(), nil
				}
			}
		}
		return ip.String(), nil
	}
}

// parseIP reads an IP address, with or without a port.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		host, _, serr := net.SplitHostPort(s)
		if serr != nil {
			return netip.Addr{}, err
		}
		if a, err = netip.ParseAddr(host); err != nil {
			return netip.Addr{}, err
		}
	}
	return a.Unmap().WithZone(""), nil
}

// Header returns a KeyFunc that keys requests by the value of the header
// field name, such as an API key; a request without it is an error (400
// from [Middleware]). The value comes from the client as it is: use it
// only for keys the server checks, and mind that each distinct value is
// one more key to keep. A long value costs a small key all the same (see
// [ratelimit.LimitError]'s Key).
func FromHeader(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("ratelimit: no %s header", name)
		}
		return v, nil
	}
}

// holdsSlot reports whether rule has a concurrency limit, whose slot a
// request holds while it is served.
func holdsSlot(rule *ratelimit.Rule) bool {
	for _, l := range rule.Limits {
		if l.Algorithm == "concurrency" {
			return true
		}
	}
	return false
}
