// Package guard holds the guards every backend gets: limiters that wrap a
// backend (a [ratelimit.Limiter], such as the Redis limiter or one written
// outside this module) and make it cheaper or keep it deciding when it
// fails, without changing any decision it makes. Each guard uses the
// backend contract of package ratelimit ([ratelimit.Limiter]: Allow, Do
// and Abilities) and the interfaces declared here ([Probed], [Carrier],
// [Heartbeater]), which a value the backend reports in its
// [ratelimit.Abilities.ForGuards] implements to offer what a guard needs
// to know about it. A wrapper reports its backend's Abilities, so it
// passes that value on, with or without an Unwrap method: nothing is
// found by unwrapping but the guards themselves ([Of]).
//
// # Design
//
// A guard is a [ratelimit.Limiter]: it sees every call, intercepts the
// operations it guards and passes the others on to the limiter it wraps
// ([ratelimit.Handlers] with Next). [Wrap] stacks the guards that its
// options turn on around a backend, outermost first:
//
//	leases → deny cache → circuit breaker → local fallback (+ fleet count) → backend
//
// Each reports the abilities of the backend (the fallback adds
// [ratelimit.OpFallback]), so [ratelimit.Rule] finds the same abilities
// with or without guards, and an operation the backend lacks fails as
// the backend's would.
//
//	guard          calls it intercepts                    needs of the backend
//	Leases         Allow (of a limit with a Prefetch),    OpReserve, OpAdjust: charge
//	               OpPeek, OpReset                        a lease, give back what it
//	                                                      did not use; OpPeek
//	                                                      (optional); its Config
//	                                                      (clock); the Fallback's
//	                                                      fleet count
//	DenyCache      Allow, OpReserve, OpAdjust,            its Config (clock, hook);
//	               OpTakeSlot, OpReset                    its slack (WithDenySlack)
//	Breaker        Allow, OpReserve, OpAdjust, OpTakeSlot Probed: a probe, which
//	                                                      errors are outages; for a
//	                                                      backend of nodes (PerNode),
//	                                                      the node of a key, a probe
//	                                                      of a node;
//	                                                      the Fallback it wraps
//	                                                      (optional): Recover
//	Fallback       Allow (to start a carry-back and keep  its Config (clock, key
//	               its ledger), OpReset; carries out      bound, hook); Carrier
//	               OpFallback; Recover for the breaker    (optional): charge
//	                                                      admissions at their
//	                                                      times, deciding nothing;
//	                                                      Heartbeater (optional),
//	                                                      which may rejoin and
//	                                                      keep marks lost with
//	                                                      writes
//	Fleet count    none: a heartbeat that a fallback      Heartbeater: beat and count
//	(JoinFleet)    reads (Fleet.Processes)                the members of a fleet
//
// Who calls whom. [ratelimit.Rule] calls the outermost guard. The deny
// cache answers a denial it holds and reports it to the backend's hook
// (Source [ratelimit.SourceCache]); otherwise it calls the backend, which
// decides and reports its own decision, and remembers the backend's
// denial. It reads the time on the backend's clock: the
// [ratelimit.WithClock] clock of the backend's [ratelimit.Config] when it
// has one (then it answers only at a time no earlier than any call it
// passed on, as a call at a later time may drop state that counts at an
// earlier one), else the process's monotonic clock; a backend whose
// denials may tell times from the start of a coarser clock tick than it
// decides on (Redis's windows tell them from the start of the server's
// millisecond) says by how much with [WithDenySlack], and the cache holds
// its denials that much less.
//
// The breaker fails a call at once, telling the backend's hook, while
// the breaker of the backend (or, for a backend of nodes that fail apart,
// [Probed.PerNode], of a node that serves the call, found with NodeOf) is
// open; otherwise it passes the call on and records its outcome, judged
// by the backend's Unavailable (for a call decided in parts on several
// nodes, each part's, from a [PartError]). An open breaker's goroutine
// probes the backend (or the node) until it answers; then it tells the
// [Fallback] it wraps, if any ([Fallback.Recover]), and closes. A backend
// reports which parts of a call failed with a PartError, and a backend of
// nodes names the node of each key, so the breaker of a node that is down
// fails only the calls it serves.
//
// Package redislimit's Limiter is this stack around its Redis backend,
// which offers Probed (with a breaker per master for a cluster client),
// Carrier (the carry script) and Heartbeater (a sorted set of members),
// and passes its slack with WithDenySlack.
//
// The fallback is the backend's [ratelimit.OpFallback]: [ratelimit.Rule]
// asks it to decide a call of a [ratelimit.FailLocal] rule that the chain
// failed (the breaker's refusal among them). It decides in process against
// each process's share of the limits ([Share]; the processes counted by
// the fleet heartbeat, [JoinFleet], around a [Heartbeater] backend) and
// remembers what it admitted. The breaker tells it ([Fallback.Recover]):
// when a probe finds the backend back, before the breaker closes, it
// hands the admissions to the backend's [Carrier], which charges them at
// their times; and when the backend decided a call while admissions wait
// and no breaker is open, it does so on a goroutine of its own. Around a
// backend that keeps marks too ([FleetAbilities.Marks]), with a fleet to
// beat in, it also keeps a ledger of what the backend admitted in windows
// still open: when a mark of the process (written by each beat, every
// [MarkEvery] while calls are admitted, and by Recover before the breaker
// closes) finds that the backend lost writes, what the ledger holds since
// the mark the backend kept is charged to it again as the fallback's
// admissions are; around a backend of nodes, whose nodes keep marks of
// their own, only what a node that lost writes holds.
//
// Three rules keep a fleet exact across an outage. A fallback that starts
// deciding in a window spends only its share of what the backend last
// told its process was left there. A breaker opens only when the
// backend's probe fails too, and a call its backend's client was too busy
// to send ([ratelimit.ErrBusy]) counts neither way. And around a backend
// whose fleet rejoins ([FleetAbilities.Rejoins]), a recovering fallback
// carries back, sheds what it would admit, carries back again, marks
// itself back and keeps its breaker open until every process its
// heartbeat counted has done the same, so no process decides by the
// backend while another still spends its share of the same window.
//
// A backend may hold calls back for a while, as redislimit's client does
// from a dial to a new primary until [Fallback.CheckMarks] charged it what
// it lacks (its fence). The guards' own work (the heartbeat and its marks,
// probes, carry-backs) runs under contexts that [IsBackground] reports,
// which such a backend lets through: the calls may be waiting for it.
//
// A guard's options are [Option] values that change nothing in a
// [ratelimit.Config]: [Wrap] and the guards' constructors find them among
// the options they are given by their type, as a backend finds its own, so
// one option list configures a backend and its guards.
package guard
