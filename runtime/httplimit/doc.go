// Package httplimit limits HTTP handlers with a ratelimit.Limiter and
// speaks rate limits to HTTP clients.
//
// [Middleware] limits an http.Handler by a [KeyFunc], such as [ClientIP]
// (which believes X-Forwarded-For only from trusted proxies) or
// [FromHeader], with options for a deny handler ([WithDenyHandler]),
// requests to leave alone ([WithSkip]) and the X-RateLimit fields
// ([WithXRateLimit]). It works with any router that takes a
// func(http.Handler) http.Handler.
//
// [WriteError] answers a *ratelimit.LimitError with 429 Too Many Requests,
// Retry-After and the RateLimit-Policy and RateLimit fields of the IETF
// draft; [SetHeaders] adds those fields to an admitted response, described
// by ratelimit.Rule.Admit, [SetAdmissionHeaders] adds them for the
// admission of a generated decorator's call (ratelimit.WithAdmission),
// and [SetXRateLimit] sets the older X-RateLimit fields.
//
// [AdminHandler] serves an operator's view of a limiter and its rules as
// JSON: each rule's limits and their overrides, and what a key would be
// told now (ratelimit.Peek); with [WithAdminReset] it also resets a key.
// It reveals keys, so it belongs behind the service's own authentication.
//
// On the client side, [ResponseError] turns an upstream's 429 or 503 with
// a Retry-After into an [UpstreamError], which a limited method returns so
// that its lines marked cooldown=true cool until then in every process
// (it has a RetryAfter() time.Duration method); [ParseRetryAfter] reads
// the header's seconds or HTTP date, capped at ratelimit.MaxCooldown.
package httplimit
