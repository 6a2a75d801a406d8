// Package ratelimit is the runtime behind ratelimitgen's generated decorators.
//
// A [Limiter] decides one call against one or more limits atomically: either
// every limit admits the call and each is charged its cost, or the call is
// denied and nothing is charged. Two limiters implement it with the same
// decisions:
//
//   - [NewRedis] keeps the state in Redis and decides each call with one Lua
//     script round trip, using the Redis server's clock, so every process
//     that shares the Redis shares one exact limit;
//   - [NewMemory] keeps the state in the process, for running without Redis
//     and for tests.
//
// # Checking a call
//
// Generated code keeps the directives of each limited method in a [Rule]
// and calls [Rule.Check] before delegating. A denied call is reported as a
// [*LimitError], which satisfies errors.Is(err, [ErrLimited]) and carries
// when to retry. Backend failures wrap [ErrBackend]; requests no backend
// could decide (a bad limit, a cost above a threshold or below zero: a
// [*CostError]) wrap [ErrInvalidLimit]. The directive options map to the
// Rule's fields:
//
//   - cost=: the units a call takes, charged to every limit;
//   - wait=: [Rule.Wait], how long a denied call may wait to be admitted.
//     Waiting calls sleep until the limit should admit them and queue per
//     rule and key, so only one of them asks the limiter at a time;
//   - shadow=true: [Rule.Shadow], never deny, only report would-be denials
//     (to a [ShadowHook]), to roll a limit out safely;
//   - onerror=: [Rule.OnError], [FailOpen], [FailClosed] or [FailLocal]
//     when the limiter cannot decide; empty means the limiter's default.
//
// Admitted calls of a pacing algorithm sleep their [Decision.Delay] before
// Check returns.
//
// # Options
//
// Both limiters take the same options ([Option]):
//
//   - [WithHook] reports every decision and failure: see [Metrics] (atomic
//     counters per limit name), [NewSlogHook] (log/slog) and [Hooks] to
//     use several;
//   - [WithErrorPolicy] sets the default error policy ([FailOpen] unless
//     set), and [WithFallbackProcesses] divides the limits the local
//     fallback enforces ([FailLocal]) among the processes;
//   - [WithOverrides] lets operators change a rule's limits at run time,
//     keeping its state; [NewRedisOverrides] reads them from a Redis hash,
//     [StaticOverrides] takes them from the process. Both also set the
//     limits of single keys of a rule and of tiers (named groups of keys):
//     a call meets its key's own limits, else its key's tier's, else the
//     rule's override, else the rule's directives (see [KeyOverrides]);
//   - [WithBreaker] tunes the Redis limiter's circuit breaker, which fails
//     calls at once (wrapping [ErrCircuitOpen]) while Redis keeps failing,
//     so a down Redis costs each call microseconds, not a timeout, and
//     probes Redis in the background so that it decides again within about
//     150ms of its return; a hook that is a [BreakerHook] is told when a
//     breaker opens and closes;
//   - [WithBatching] tunes how many concurrent calls the Redis limiter
//     decides together in one script run, for throughput under load (on
//     by default; a call alone is sent at once);
//   - [WithDenyCache] sizes the Redis limiter's local deny cache, which
//     repeats a recent denial without asking Redis for calls that Redis
//     would deny too (on by default, bounded; 0 turns it off);
//   - [WithPrefix], [WithMaxKeys] and, for tests, [WithClock].
//
// A limiter that wraps another, to measure or trace its calls, is a
// [Wrapper]: [Rule.Check] reads the wrapped limiter's overrides and error
// policy through its Unwrap method. The modules under adapters/ of the
// repository export to Prometheus and OpenTelemetry this way, and serve
// limits over gRPC.
//
// # Outages
//
// Under [FailLocal] (onerror=local), a call the Redis limiter cannot
// decide, because Redis failed or the breaker is open, is decided by the
// limiter's in-process fallback: a [MemoryLimiter] with the same algorithms,
// against the same limits (after overrides), so an outage never lifts a
// limit. Its decisions carry [SourceFallback]; hooks see them as decisions
// (after the backend failure), and [Metrics] counts them in
// Counters.Fallback. Each process enforces the limits on its own, so N
// processes admit up to N times a limit during an outage;
// [WithFallbackProcesses] gives each its share. When Redis answers again it
// decides again, from the state it kept: the fallback's counts are not
// written back, so a call admitted by the fallback is not charged in Redis.
//
// A failing Redis call costs what the client spends on it before the
// breaker opens: build the go-redis client with [RedisOptions] (or
// [ClusterOptions] for a Redis Cluster), which sets short timeouts and one
// attempt per call (and MaxRedirects 1, so that a master that does not
// answer costs a call at most two timeouts). A batched call waits for a
// stalled Redis at most 1.1 times the client's ReadTimeout.
//
// # Keys
//
// A call's Redis keys are <prefix>{<name>:<key>}:<limit index>:<algorithm>,
// with '%', '{', '}', ':' and control bytes of the name and the per-call
// key percent-encoded, so the braces hold the call's one hash tag. A key
// whose encoded form is longer than 64 bytes is replaced by a stand-in of
// at most 97 bytes, its first encoded bytes (at most 32), ':' and the hex
// SHA-256 of the whole key, which is all that is sent to Redis:
//
//	ratelimit:{svc.Store.Get:alice}:0:log
//	ratelimit:{svc.Store.Get:Bearer eyJhbGciOiJIUzI1NiIsInR5c:1cb20db1d5bd20da3a61933baaa3f6688c07a9a0322c6bb3180f21e9a40a892c}:0:log
//
// No encoded key holds a ':', so a stand-in never stands for a short key.
// [LimitError]'s Key, a [Hook]'s request and [NewMemory]'s state hold the
// same stand-in, so a Redis key is at most the prefix, the encoded name and
// 107 bytes (for a call's first ten limits), whatever a caller sends.
//
// # HTTP
//
// [WriteError] turns a [*LimitError] into a 429 response with Retry-After
// and the RateLimit-Policy and RateLimit fields of the IETF draft, and
// [SetHeaders] adds those fields to admitted responses, described by
// [Rule.Admit] (Check that also returns the admitting decision);
// [SetXRateLimit] sets the older X-RateLimit fields. [Middleware] limits an
// http.Handler by a [KeyFunc] such as [ClientIP] (which only believes
// X-Forwarded-For from trusted proxies) or [Header], with options for a
// deny handler ([WithDenyHandler]), requests to leave alone ([WithSkip])
// and the X-RateLimit fields ([WithXRateLimit]).
//
// The package is imported as "github.com/ratelimitgen/ratelimitgen/runtime"
// and named ratelimit, so code reads ratelimit.ErrLimited.
package ratelimit
