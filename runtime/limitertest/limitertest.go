// Package limitertest checks that a ratelimit.Limiter decides calls as the
// in-process limiter (ratelimit.NewMemory) does, crossing every feature of
// package ratelimit with every other. A backend's tests run it with one
// call:
//
//	func TestConformance(t *testing.T) {
//		limitertest.Run(t, limitertest.Backend{
//			New: func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter {
//				return mybackend.New(connect(t), opts...) // fresh state, opts honoured
//			},
//			Clock: true, // it reads the time from ratelimit.WithClock's clock
//		})
//	}
//
// # What it checks
//
// Run runs one subtest per cross of features, named by the cross, such as
// "token_bucket/keys_per_line/cost=3",
// "fixed_window/calendar=month/tz=Europe/Paris/reserve/settle=debt" or
// "concurrency/wait/release". For each algorithm (ratelimit.Algorithms):
//
//   - one_limit, several_limits (with a sliding log and a fixed window,
//     all or nothing), keys_per_line (Rule.KeyExprs: a limit per user
//     and a sliding log for every call as one, Rule.Admit and
//     Rule.Peek with a key per limit), and shared_line (three rules that
//     share a line, Rule.Shared, spend one budget, all or nothing with
//     each user's own line), each × cost=1 and cost=3;
//   - wait/beyond_budget (a denial whose RetryAfter is beyond Rule.Wait
//     returns at once) and wait/admitted (one within it waits and is
//     admitted), and shadow (Rule.Shadow never denies, yet charges what
//     the limit admits), each through Rule.Check, keys_per_line/ through
//     Rule.Check with a key per limit and reserve/ through Rule.Reserve;
//   - reserve/settle=refund_all, refund, exact and debt (Rule.Reserve and
//     Reservation.Settle), reserve/settle_cancelled (a settle and a slot's
//     give-back on a cancelled context still give back), reserve/refund
//     (Reservation.Refund gives back all a reservation took),
//     reserve/only_failures (Rule.OnlyFailures: calls in flight never deny
//     each other, failures fill the limit) and reserve/shared_line
//     (reservations with a key per limit, a shared line among them,
//     refunded and settled on every line at once);
//   - keys_per_line/adjust: OpAdjust of a request with a key per
//     limit (a shared line among them, where the backend decides shared
//     lines) charges, and with Backend.Clock refunds, each limit under
//     its own key, as a Peek of each key tells;
//   - per_call: a limit that counts calls (ratelimit.Limit.PerCall) beside
//     one that takes their cost, decided all or nothing by Allow with one
//     key and with a key per limit and by Reserve, whose Settle leaves
//     the calls' limit as it is;
//   - peek_reset (ratelimit.Peek before every call tells what it gets;
//     ratelimit.Reset starts afresh);
//   - overrides/rule, key, tier, unlimited and block (WithOverrides of
//     ParseOverrides), also keys_per_line/overrides/ and
//     concurrency/overrides/;
//   - concurrency: a concurrency slot beside the limit, taken all or
//     nothing, given back by Release or Settle, peeked at and reset, its
//     30 s leases ending on the clock;
//   - hooks: a limitmetrics.Metrics given with WithHook counts what the
//     twin's counts (admissions, denials, shadow denials, near-limit
//     admissions, calls in flight) after every call;
//   - with_admission: Rule.Check with a context of ratelimit.WithAdmission
//     records the same Admission as the twin's, of one key, of a key per
//     limit, of a limit that counts calls and of a rule with a shared
//     line;
//   - leases/one_line, leases/keys_per_line (a leased line for every call
//     as one, then an exact line per user), leases/second_line (an exact
//     line per user, then a leased line for every call as one, leased
//     under its own key and index), leases/per_call (a leased line
//     that counts calls, then an exact line that takes the cost),
//     leases/shared_line (a leased line, then a line shared with a rule
//     whose calls are not leased) and, for fixed_window,
//     leases/calendar (a day in Europe/Paris, across its midnight), each ×
//     cost: three guard.Leases over one limiter of the backend (three
//     processes) call on a limit with a Prefetch, filling it many times
//     on the suite's clock; an oracle replays every admitted call at its
//     time on a fresh in-process limiter without leases, which must admit
//     them all, and the leases must have served calls and admitted at
//     least 70% of what the limit alone admits of the same calls; a call
//     its lease can serve takes its units from the lease when admitted
//     and none when another line denies it (all or nothing);
//     leases/peek × cost: ratelimit.Peek before every call of a leased
//     line (alone, first or second) tells what Allow then decides, from
//     the lease or not; and leases/dead_process × cost: a process dies
//     holding a lease it admitted calls from, which never ends, and
//     another fills the limit exactly for two periods, which the oracle
//     replays (all algorithms but leaky_bucket, which takes no Prefetch;
//     with Backend.Clock only);
//
// and for fixed_window, calendar=day, week, month and year × tz=UTC and
// Europe/Paris, each × cost, × several_limits × cost, × keys_per_line ×
// cost, × per_call, × shared_line × cost, × peek_reset, × overrides (and keys_per_line/overrides) in
// calendar terms, × reserve/settle, and × wait/beyond_budget and
// wait/at_period_end (a call denied 30ms before its period ends waits
// for the end) made each way a call waits (Check, a key per limit,
// Reserve). Overrides crosses also compare Rule.Explain's limits and
// sources. The crosses of concurrency limits alone are concurrency/held
// (never more calls than slots), hold_release/lease=30s, wait/release and
// wait/deadline (a call of concurrency=1 wait=5s, lease 30 s, made while
// the slot is held waits for it until its wait is over, whatever the
// lease, and a slot given back admits it), and keys_per_line (a slot is
// held under one key: a rule of a slot and a key per limit fails every
// call with ErrInvalidLimit and takes no slot). The crosses of an outage are
// outage/onerror=allow, deny and local: with the backend's limiter behind
// one that fails with ratelimit.ErrBackend, FailOpen lets calls through
// and FailClosed fails them, charging nothing (the backend, back, admits
// what the limit had left), and FailLocal has them decided by the
// backend's fallback (ratelimit.OpFallback) (Source ratelimit.SourceFallback, never
// more than the limit), or fails them when it has none. With
// Backend.Outage, outage/real/onerror=allow, deny and local cross the
// same policies with a real outage: the backend's guards see it fail and
// see it back, and within a minute of its return the backend decides
// again; then the limit holds exactly what the outage left it, the units
// a fallback carried back (package guard) included; outage/real/per_call/
// onerror=local does so for a limit that counts calls, to which the
// fallback carries back 1 call per admission, whatever its cost, and
// outage/real/settle requires a settle and a refund made during the
// outage to fail with ErrBackend and give nothing back;
// outage/real/shared_line/onerror=local does what onerror=local does for
// a line shared by two rules, to whose own state the fallback carries back, and outage/real/top_denied
// requires OpTopDenied to fail with
// ErrBackend while the backend is down and to answer once it is back.
// The crosses of queues of waiting calls (ratelimit.OpTurn) are, for
// each algorithm, queue/<algorithm>/turns (AllowInTurn step by step on
// the suite's clock: a place for a waiter, none for a call denied beyond
// its wait, no call decided past a waiting one, a waiter that gives up
// or stays away past QueueGrace frees its place) and
// queue/<algorithm>/order and queue/<algorithm>/reserve/order (waiters
// that began to wait one after another, with Rule.Check or Rule.Reserve,
// are admitted in that order, none asking before its RetryAfter),
// queue/keys_per_line/turns and queue/concurrency/order (calls waiting
// for a concurrency slot take it in the order they began to wait), and
// queue/concurrency/turns (a call behind others takes a slot while more
// are free than calls are ahead of it, never the one a call ahead needs).
// The turns and order crosses also check Rule.Peek of a rule with Wait
// (what a new call would be told behind the waiters).
// top_denied checks that a limiter that counts denials lists the keys its rules denied,
// most first, redacted.
//
// The crosses of cooldowns (ratelimit.OpCool, Rule.Cooldown), for a
// backend that keeps them, are cooldown/<algorithm>/several_lines (a
// cooled line denies its key with the cooldown's end as RetryAfter,
// charging neither line; other keys are decided as ever; a sooner
// cooldown never shortens a later one, and none lasts beyond
// ratelimit.MaxCooldown), cooldown/keys_per_line (a line that counts
// every call as one cools for every user, a user's line for that user),
// cooldown/shared_line (a cooled shared line denies every rule that
// shares it), cooldown/peek, cooldown/reserve (Rule.Reserve of a cooled
// key takes nothing, a concurrency slot included), cooldown/wait/admitted
// and cooldown/wait/beyond_budget; for a backend that keeps none,
// cooldown/unsupported (Rule.Cooldown fails with errors.ErrUnsupported,
// and calls are decided by the limits alone). With Backend.Outage,
// outage/real/cooldown/onerror=allow, deny and local require a cooldown
// that cannot be read to leave the call to the policy: let through,
// failed, or decided by the fallback, which keeps no cooldowns.
//
// When the backend reads the time from ratelimit.WithClock (Backend.Clock),
// each cross is differential: it runs one sequence of calls against the
// backend and against a fresh ratelimit.NewMemory twin, both on one clock
// that moves only when the suite moves it (it starts in the year 2100,
// later than any server's clock), and requires the same outcome of every
// call: the Decision (Allowed, Remaining, RetryAfter, ResetAfter, Delay,
// LimitIndex and Source, where a deny cache's repeat of a denial,
// ratelimit.SourceCache, counts as the backend's), the *LimitError's
// fields, the class of any other error (ErrInvalidLimit, ErrBackend), and
// Peek's answers. Crosses that must wait in real time (Rule.Wait with an
// admission) check invariants on both instead. A sequence that stalled
// for more than 900ms of real time beyond the clock (the keys of a Redis
// backend expire in real time) is run again on fresh limiters.
//
// Without a controllable clock, the crosses that can check invariants on
// limits of a day do: a fresh key admits exactly what the tightest of its
// limits holds, never more, then denies with a retry within the day; the
// users of a key per limit each get their own limit and all of them no
// more than the shared one; a settle leaves exactly the units it should;
// Peek foretells each call and Reset empties the limit; a shadow rule
// never denies yet charges; the waits and the concurrency crosses held
// and wait/ run as with a clock. The others (sequences, calendars,
// overrides, slot sequences) are skipped, saying so.
//
// # Capabilities
//
// Run first asks the backend, through ratelimit's exported API only, what
// it can do: which algorithms and calendar periods it decides, whether
// ratelimit.Peek and ratelimit.Reset reach it, whether Rule.Reserve can
// settle on it and take concurrency slots, whether its Config applies
// WithOverrides (a limiter whose Abilities carry its Config), and whether it reports
// to WithHook's hook. The crosses of a capability it lacks are skipped,
// with t.Skip saying which and why.
//
// Run takes seconds: sizes are bounded and the clock is the suite's.
// Backend.New is called once for the probes and once per run of a cross,
// from its subtest, and each limiter must start with no state: a Redis
// backend flushes its server.
package limitertest

import (
	"testing"

	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Backend is how Run makes limiters of the backend under test.
type Backend struct {
	// New returns a limiter of the backend with no state, configured with
	// opts (the options of package ratelimit: WithClock, WithOverrides
	// and so on). Run calls it once per cross, from that cross's subtest.
	New func(t *testing.T, opts ...ratelimit.Option) ratelimit.Limiter
	// Clock reports whether the limiter reads the time from the clock of
	// ratelimit.WithClock, as NewMemory and redislimit.New do: then Run
	// compares its decisions with the in-process twin's; else it checks
	// invariants only.
	Clock bool
	// Outage, when not nil, takes the backend down for real for the
	// limiters New made (a Redis backend: its server stopped), and
	// returns the function that brings it back, with or without the state
	// it had. Run then crosses the error policies, and the guards in
	// front of the backend (breaker, fallback and its carry-back, as the
	// backend offers them in its ratelimit.Abilities' ForGuards), with
	// that outage; without it, they are crossed with a wrapper's
	// simulated failures only.
	Outage func(t *testing.T) (restore func())
}

// Run checks that the limiters b makes decide as package ratelimit
// specifies, with one subtest per cross of features (see the package
// doc), skipping those of capabilities they lack.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.New == nil {
		t.Fatal("limitertest: Backend.New is nil")
	}
	s := &suite{b: b, caps: probe(t, b)}
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) { s.algorithm(t, alg) })
	}
	t.Run("concurrency", func(t *testing.T) { s.concurrency(t) })
	t.Run("outage", func(t *testing.T) { s.outage(t) })
	t.Run("top_denied", func(t *testing.T) { s.topDenied(t) })
	t.Run("cooldown", func(t *testing.T) { s.cooldown(t) })
	t.Run("queue", func(t *testing.T) { s.queue(t) })
	t.Run("wrapped", func(t *testing.T) { s.wrapped(t) })
}

// suite is one Run: the backend and what it can do.
type suite struct {
	b    Backend
	caps capabilities
}

// algorithm runs every cross of alg.
func (s *suite) algorithm(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "decide "+string(alg), s.caps.algorithms[alg])
	for _, cost := range costs {
		t.Run(name("one_limit", cost), func(t *testing.T) { s.oneLimit(t, alg, cost) })
		t.Run(name("several_limits", cost), func(t *testing.T) { s.severalLimits(t, alg, cost) })
		t.Run(name("keys_per_line", cost), func(t *testing.T) { s.keysPerLine(t, alg, cost) })
		t.Run(name("shared_line", cost), func(t *testing.T) { s.sharedLine(t, alg, cost) })
	}
	for _, way := range waitWays {
		prefix := ""
		if way != "check" {
			prefix = way + "/"
		}
		t.Run(prefix+"wait/beyond_budget", func(t *testing.T) { s.waitBeyondBudget(t, alg, way) })
		t.Run(prefix+"wait/admitted", func(t *testing.T) { s.waitAdmitted(t, alg, way) })
		t.Run(prefix+"shadow", func(t *testing.T) { s.shadow(t, alg, way) })
	}
	for _, settle := range settles {
		t.Run("reserve/settle="+settle.name, func(t *testing.T) { s.reserveSettle(t, alg, settle.delta) })
	}
	t.Run("reserve/settle_cancelled", func(t *testing.T) { s.settleCancelled(t, alg) })
	t.Run("reserve/refund", func(t *testing.T) { s.refund(t, alg) })
	t.Run("reserve/only_failures", func(t *testing.T) { s.onlyFailures(t, alg) })
	t.Run("reserve/shared_line", func(t *testing.T) { s.sharedLineReserve(t, alg) })
	t.Run("keys_per_line/adjust", func(t *testing.T) { s.adjustKeys(t, alg) })
	t.Run("per_call", func(t *testing.T) { s.perCall(t, alg) })
	t.Run("peek_reset", func(t *testing.T) { s.peekReset(t, alg) })
	for _, o := range overrideCases {
		t.Run("overrides/"+o.name, func(t *testing.T) { s.overrides(t, alg, o, false) })
		t.Run("keys_per_line/overrides/"+o.name, func(t *testing.T) { s.overrides(t, alg, o, true) })
	}
	t.Run("concurrency", func(t *testing.T) { s.slotWithRate(t, alg, nil) })
	for _, o := range overrideCases {
		t.Run("concurrency/overrides/"+o.name, func(t *testing.T) { s.slotWithRate(t, alg, &o) })
	}
	t.Run("hooks", func(t *testing.T) { s.hooks(t, alg) })
	t.Run("with_admission", func(t *testing.T) { s.withAdmission(t, alg) })
	if !factsOf(alg).Paces { // a lease cannot tell a paced call its delay
		crosses := leaseCases
		if factsOf(alg).Calendar {
			crosses = append(crosses[:len(crosses):len(crosses)], "calendar")
		}
		for _, cross := range crosses {
			for _, cost := range costs {
				t.Run(name("leases/"+cross, cost), func(t *testing.T) { s.leases(t, alg, cross, cost) })
			}
		}
		for _, cost := range costs {
			t.Run(name("leases/peek", cost), func(t *testing.T) { s.leasePeek(t, alg, cost) })
			t.Run(name("leases/dead_process", cost), func(t *testing.T) { s.leaseDeath(t, alg, cost) })
		}
	}
	if factsOf(alg).Calendar {
		s.calendars(t)
	}
}

// factsOf returns alg's row of the registry: the suite asks what an
// algorithm does, never which one it is.
func factsOf(alg ratelimit.Algorithm) limitfacts.Algorithm {
	a, _ := limitfacts.Lookup(string(alg))
	return a
}

// windowed reports whether alg counts in aligned windows (fixed or
// sliding), whose next window may admit a call a period sooner.
func windowed(alg ratelimit.Algorithm) bool {
	s := factsOf(alg).State
	return s == limitfacts.Window || s == limitfacts.Windows
}
