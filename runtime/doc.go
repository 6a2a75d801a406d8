// Package ratelimit is the core of ratelimitgen's runtime: what generated
// decorators import, the in-process limiter, and what every backend shares.
//
// A [Limiter] decides one call against one or more limits atomically: either
// every limit admits the call and each is charged its cost, or the call is
// denied and nothing is charged. Two limiters implement it with the same
// decisions:
//
//   - [NewMemory] keeps the state in the process, for running without Redis
//     and for tests;
//   - redislimit.New (package runtime/redislimit) keeps the state in Redis
//     and decides each call with one Lua script round trip, using the Redis
//     server's clock, so every process that shares the Redis shares one
//     exact limit.
//
// Package runtime/httplimit limits http.Handlers and writes 429 responses
// and the RateLimit header fields; package runtime/redislimit also reads
// overrides from a Redis hash.
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
//     rule and key, admitted in the order they began to wait (see Waiting);
//   - shadow=true: [Rule.Shadow], never deny, only report would-be denials
//     (to a [ShadowHook]), to roll a limit out safely;
//   - onerror=: [Rule.OnError], [FailOpen], [FailClosed] or [FailLocal]
//     when the limiter cannot decide; empty means the limiter's default.
//
// Admitted calls of a pacing algorithm sleep their [Decision.Delay] before
// Check returns.
//
// # Waiting
//
// With Wait > 0, a denied call sleeps until the limit should admit it (the
// denial's RetryAfter) and tries again, for at most Wait and never past
// its context's deadline; a denial whose RetryAfter is beyond that budget
// is returned at once. On a limiter that offers [OpTurn] (the memory and
// Redis limiters do), the calls of one rule and key are admitted in the
// order they began to wait across every process sharing its backend: a
// call is decided only in its turn, and one behind others is told when
// it could be admitted at the soonest. On another, the calls that wait in
// one process queue in order and only the first of them asks the limiter
// (sleeping up to 10% longer, so that processes do not ask in step), and
// a call that joins such a queue does not ask the limiter first. If the
// context ends while the call
// waits, Check returns at once an error for which both errors.Is(err,
// ctx.Err()) and errors.Is(err, [ErrLimited]) hold, and errors.As finds the
// [*LimitError] of the last denial.
//
// A call admitted with a [Decision.Delay] sleeps that long before Check
// returns nil; if its context ends first, Check returns an error wrapping
// ctx.Err() (the call was charged). A shadow rule never denies, waits or
// paces: its would-be denials go to the limiter's hook (ShadowLimited of a
// [ShadowHook]), and a call the limiter cannot decide goes through.
//
// # Failures
//
// An error wrapping [ErrBackend] (the backend failed, or its circuit
// breaker is open: [ErrCircuitOpen]) is handled by the error policy: the
// rule's OnError, or when empty the limiter's default (its [Config]'s
// ErrorPolicy, [FailLocal] unless set; FailLocal for a limiter that
// reports no Config too). Under
// [FailOpen] Check returns nil (the limiter has reported the error to its
// hook), under [FailLocal] what the limiter's [OpFallback] decides, and under
// [FailClosed] (or any other value, or FailLocal when the fallback cannot
// decide) the error. Other errors are returned whatever the policy: an
// invalid request (wrapping [ErrInvalidLimit], such as a [*CostError]) is a
// bug no backend could decide, and a call whose context has ended returns
// an error wrapping ctx.Err(), since its caller has given up.
//
// # Options
//
// Every limiter takes the [Option]s of this package, which set a [Config]:
//
//   - [WithHook] reports every decision and failure to one hook or
//     several: see limitmetrics.Metrics (atomic counters per limit name)
//     and [NewSlogHook] (log/slog);
//   - [WithErrorPolicy] sets the default error policy ([FailLocal] unless
//     set: an outage never lifts a limit; [FailOpen] lifts them all while
//     the backend fails);
//   - [WithOverrides] lets operators change a rule's limits at run time,
//     keeping its state; [StaticOverrides] takes them from the process (and
//     redislimit.NewOverrides from a Redis hash). Both also set the limits
//     of single keys of a rule and of tiers (named groups of keys): a call
//     meets its key's own limits, else its key's tier's, else the rule's
//     override, else the rule's directives (see [KeyOverrides]);
//   - [WithMaxKeys] and, for tests, [WithClock].
//
// A backend's own options (redislimit's batching, deny cache, circuit
// breaker, key prefix and fallback shares) are not Options: the backend's
// constructor takes them and the core's in one list, and passing one to
// another limiter does not compile (see [Option]).
//
// # Backends
//
// A backend is a [Limiter]: Allow decides, Do carries out every other
// operation ([OpKind]: reservations and settles, slots, cooldowns, turns
// in a queue, peeks, resets, denials, the in-process fallback of
// [FailLocal]) and Abilities reports which it supports, and the [Config]
// of its options. Any limiter, in this module or not, can be one;
// [Handlers] carry out Do for a backend that fills them. [Rule] and the
// functions of this package call nothing but these three methods of the
// limiter they are given, so a limiter that wraps another (one that
// measures or traces its calls) sees every call. The requests of a Rule
// carry it ([Request.Rule]), so a backend can keep what it derives from
// the rule's limits once, and offer a fast path ([Plan]), as
// [MemoryLimiter] does. Package limitertest checks a backend against this
// contract. The modules under adapters/ of the repository export to
// Prometheus and OpenTelemetry as wrappers, and serve limits over gRPC.
//
// Under [FailLocal] (onerror=local), a call the backend cannot decide is
// decided by its in-process fallback, with the same algorithms against the
// same limits (after overrides), so an outage never lifts a limit. Its
// decisions carry [SourceFallback]; hooks see them as decisions (after the
// backend failure), and limitmetrics.Metrics counts them in Counters.Fallback.
//
// # Keys
//
// A per-call key is kept as it is when its escaped form ('%', '{', '}', ':'
// and control bytes percent-encoded) is at most 64 bytes, and otherwise
// replaced by a stand-in of at most 97 bytes: its first escaped bytes (at
// most 32), ':' and the hex SHA-256 of the whole key, such as
//
//	Bearer eyJhbGciOiJIUzI1NiIsInR5c:1cb20db1d5bd20da3a61933baaa3f6688c07a9a0322c6bb3180f21e9a40a892c
//
// No escaped key holds a ':', so a stand-in never stands for a short key.
// [LimitError]'s Key, a [Hook]'s request, the state of every limiter and
// the key of every override hold the same stand-in, so what a limiter
// stores and sends per key is bounded whatever a caller sends.
//
// A rule's limits may each have a key of their own ([Rule.KeyExprs]; its
// calls give [Rule.Check] a key per limit): 10 a second per user and 1000
// an hour for everyone is a rule of two limits keyed by the user and by
// "". Limit i's state belongs to the name, its key and i, so limits that
// share a key keep what they would keep under one key. The call stays all
// or nothing on every limiter: a denied call charges no limit, and its
// [*LimitError] names the denying limit (the one with the longest
// RetryAfter) and its key expression.
//
// Overrides apply to such a call per limit, positionally (an override's
// limit i replaces limit i, as for one key): limit i is decided against
// limit i of the override of its key (its own or its tier's) when the
// limit is keyed (KeyExprs[i] != "", or KeyExprs is nil) and that
// override is usable and has a limit i; else against limit i of the
// rule's override; else against Limits[i]. A limit that counts every call
// as one never takes a key's override. A key's override of unlimited or
// block applies to the whole call: block on any limit's key denies the
// call, otherwise unlimited on one exempts it from every limit, global
// ones included. The rule's unlimited or block applies only when no key
// has an override of its own.
//
// # Logs
//
// [NewSlogHook] logs denial episodes, not denied calls. An episode of a
// name and key begins with a denial the backend (or the fallback) made
// while the pair had none going on, and is logged then, at Warn; it ends
// after a minute without a denial of the pair. So a client that keeps
// calling over its limit, admitted now and then as the limit lets it, is
// one episode however long it lasts: it writes one line when it begins,
// one every 5 minutes while it goes on, and one after it ends, which the
// hook writes when it notices the end (at the pair's next decision, or when
// another pair takes the episode's place in its table). Every call is
// still logged at Debug, and counted by limitmetrics.Metrics. A denial repeated from a
// deny cache ([SourceCache]) never begins an episode, so it never logs
// above Debug.
//
// The output is bounded: the hook remembers about 4,096 episodes, a new
// one taking the place of the least recently denied (whose end then goes
// unlogged; if that pair is denied again, it begins another episode), and
// logs at most 100 beginnings and 10 failures a minute, leaving the others
// at Debug and counting them in the unlogged attribute of the next line
// of their kind. An outage is logged once per change of a circuit
// breaker's state (see [BreakerHook]), and a breaker that opens and closes
// again and again at most 5 times a minute per node: the calls it refuses
// are logged at Debug, and only the failures that opened it (as many as
// redislimit's WithBreaker failures, plus the calls in flight then, at
// most 10 a minute) at Error.
//
// Keys are often personal data (user ids, addresses, API keys), so a key
// is logged as its digest: "sha256:" and the first 12 hex digits of the
// SHA-256 of the key as the call gave it (for a long key, the start of the
// digest its stand-in ends with), such as sha256:fdee430d40bd for "ada".
// An operator tells one key's lines from another's, and finds a key's
// lines with
//
//	printf %s "$key" | sha256sum | cut -c1-12
//
// A digest hides a key only from whom cannot guess it: addresses and small
// numbers are easily tried. [SlogHook.WithRawKeys] logs keys as hooks see
// them, where the logs may hold them.
//
// The package is imported as "github.com/ratelimitgen/ratelimitgen/runtime"
// and named ratelimit, so code reads ratelimit.ErrLimited.
package ratelimit
