// Package redislimit decides rate limits in Redis: every process that
// shares a Redis server (standalone, behind Sentinel, or a Cluster) shares
// one exact limit, decided atomically with one Lua script round trip on
// the server's clock.
//
//	limiter := redislimit.New(redis.NewClient(redislimit.ClientOptions(opts)))
//	svc := store.NewStoreWithRateLimit(impl, limiter)
//
// [New] returns a [Limiter], a ratelimit.Limiter that makes exactly the
// decisions of ratelimit.NewMemory, its in-process twin, for the same
// calls. It takes the options of package ratelimit (hooks, overrides, the
// error policy) and its own in one list of [Option]s; its own do not
// compile with ratelimit.NewMemory, which does not honour them:
//
//   - [WithBatching] decides concurrent calls together, several per script
//     run, for throughput under load (on by default; a call alone is sent
//     at once);
//   - [WithDenyCache] sizes the local deny cache, which repeats a denial
//     that no call can change until it ends, with the numbers Redis would
//     tell, for at most [WithDenyHold] (on by default, bounded; 0 turns it
//     off);
//   - [WithBreaker] tunes the circuit breaker, which fails calls at once
//     (wrapping ratelimit.ErrCircuitOpen) while Redis keeps failing, so a
//     down Redis costs each call microseconds, not a timeout, and probes
//     Redis in the background so that it decides again within about 150ms
//     of its return;
//   - [WithFallbackProcesses] divides the limits the local fallback
//     enforces under ratelimit.FailLocal among the processes;
//   - [WithPrefix] sets the prefix of every key.
//
// The deny cache, the circuit breakers, the local fallback with its
// carry-back and the heartbeat are package guard's guards, which wrap any
// backend that offers what they need; a [Limiter] is those guards around
// the Redis backend, which offers them Redis's side (its probes, the
// carry script, the heartbeat's sorted set).
//
// # Keys
//
// A call's Redis keys are <prefix>{<name>:<key>}:<limit index>:<algorithm>,
// with '%', '{', '}', ':' and control bytes of the name and the per-call key
// percent-encoded, so the braces hold the call's one hash tag and a Cluster
// keeps every key of a call on one master:
//
//	ratelimit:{svc.Store.Get:alice}:0:log
//	ratelimit:{svc.Store.Get:Bearer eyJhbGciOiJIUzI1NiIsInR5c:1cb20db1…}:0:log
//
// A key whose encoded form is longer than 64 bytes is sent as its stand-in
// (see ratelimit.LimitError's Key), so a Redis key is at most the prefix,
// the encoded name and 107 bytes whatever a caller sends. [Limiter.Key]
// names the key of a limit for redis-cli.
//
// A call with a key per limit (ratelimit.Request's Keys, from
// a ratelimit.Rule with KeyExprs) keeps limit i under Keys[i], so its limits
// with different keys have different hash tags: a global limit lives on
// one master, each user's on the master of its tag, and the load of a rule
// without a global limit spreads over the masters. On a single server or
// behind Sentinel one script run decides every limit. On a Redis Cluster
// (or a Ring) the limits are grouped by key and each group is decided
// atomically by one script run, the groups concurrently (one round trip
// of latency, a run per key); when one group denies the call (or fails),
// the groups that admitted it are refunded by another script run before
// Allow returns. A refund leaves what the state would hold had the call
// never been charged: a sliding log removes the call's entry, a window
// takes the cost off its count if it is still the window the call counted
// in (a sliding window that moved on, off its previous count), and a
// bucket stores its TAT again if no call charged it since; a bucket that
// other calls charged meanwhile has its TAT moved back by the call's
// interval less what it refilled since the call, which may leave it
// holding up to that refill (less than a round trip's worth) more than
// without the call, never less. So no call is admitted that one atomic decision of every limit
// would deny, and a denied call leaves no charge behind; but between a
// group's charge and its refund (about a round trip) a concurrent call can
// be denied by that charge. Measured on a three-master cluster on one
// loaded 2-core machine, 16 goroutines over three clients calling a rule
// of a limit per user and a global limit that the users' calls exactly
// fill (one denial per user by its own limit, and so one refund of the
// global limit each): 2 to 4 calls of 1,000 (0.2–0.4%) were denied that
// one atomic decision would have admitted, all near the end of the run,
// where the global limit is nearly full. The deny cache does not answer
// calls with a key per limit (it remembers denials by name and key);
// batching, the fallback and its carry-back, Peek and the breakers take
// them (a refund that fails leaves its charge, to lapse with its window).
// Reset of a key clears every limit keyed by it ("" names the limits that
// count every call as one).
//
// The calls of a rule with a wait that wait on one name and key hold
// their places in <prefix>{<name>:<key>}:queue (a sorted set of tickets,
// the microsecond each began to wait) and <prefix>{<name>:<key>}:queue:due
// (when each was told to come back), beside the limits' keys, so one
// script run ([Limiter.AllowInTurn]) reads the queue and decides the call
// in its turn; both expire a second after the last place's grace
// (ratelimit.QueueGrace) ends, and a queue holds at most
// ratelimit.MaxQueue places: 45 bytes each up to 128 places (Redis keeps
// both keys packed), 147 past that (measured on Redis 7.0).
//
// # Scripts and memory
//
// A call of one limit runs a script written for that limit, its values
// built in, so the server parses no arguments and runs only that
// algorithm's code; calls of several limits, batches, and limits beyond
// the first 1,024 distinct ones of the process (overrides can make many)
// run one generic script that takes the limits as arguments. Each script is
// loaded into Redis's script cache on its first use (EVALSHA, reloaded
// after NOSCRIPT). A window limit's own script reads the server's clock
// through its key's TTL, which ends a second after the window, and reads
// TIME only when a window starts.
//
// A calendar period (ratelimit.Limit.Calendar) is decided by the generic
// script, still on the server's clock in one round trip: Lua knows no time
// zones, so each call sends the starts of four of the period's windows
// around the client's clock (the previous, the current, the next and the
// one after), and the script counts the call in the one that holds the
// server's time. A client clock off by more than a window gets the
// server's time back in an error, having charged nothing, and the call is
// sent again with windows around it: two round trips, once per call made
// that far off. The key is the fixed window's, expiring a second after its
// calendar window.
//
// A sliding-log limit keeps one list entry (about 10 bytes) per admitted
// unit in its window, and its key expires one second after its window
// empties; a window's key a second after its window (a sliding window: the
// next) ends, a bucket's a second after it is full.
//
// # Outages
//
// A call Redis cannot decide costs what the client spends on it: its dial
// or read timeout, times the attempts it makes (1 + MaxRetries for errors
// it retries, and DialerRetries dials per attempt, with their back-offs).
// After a few such failures in a row, and a probe that Redis does not
// answer either, a circuit breaker fails the calls at once until a
// background probe finds Redis back ([WithBreaker]); with a
// Redis Cluster client each master has its own breaker, so a master that
// is down fails only the calls whose keys it holds; a failover client
// (Sentinel) has one, whose probe dials through the sentinels, so it finds
// a promoted replica.
//
// [ClientOptions] (or [ClusterOptions], [FailoverOptions] for Sentinel) make
// that one short timeout: they set short timeouts and one attempt per call.
// [Limiter.HealthCheck] says at start-up whether Redis can decide calls. The
// limiter's own load is no outage: a call that waited the client's
// PoolTimeout for a connection is shed (denied with a retry,
// ratelimit.ErrBusy, whatever the policy) and counts toward no breaker.
// Under ratelimit.FailLocal, the default, the limiter's in-process fallback
// decides what Redis cannot, against each process's share of the same
// limits, starting in a window from its share of what Redis last told it was
// left there: the processes sharing a Redis count themselves with a
// heartbeat, one script run a second per client on <prefix>{processes} (the
// limiters of one client are one process; see [WithFallbackProcesses]), and
// a denied caller is told the share that denied it. When a probe finds Redis
// back, before the breaker closes, what the fallback admitted in windows
// still open (and a sliding window's previous window, which still weighs) is
// charged to Redis at the times it was admitted, as much as fits (bounded:
// 65,536 admissions per process), and the probe waits until every process
// the heartbeat counted has found Redis back and done the same (4 s at
// most); callers are decided by the fallback meanwhile. Without an open
// breaker (breakers off, or failures too few to open one), the first call
// Redis decides after the fallback admitted some starts the same carry-back
// on a goroutine of its own, and Redis decides calls meanwhile. So a window
// that spans an outage admits at most its limit plus the calls Redis
// admitted in it without the fallbacks knowing (after a process's last
// answer before the outage, answered late around it, or, without a breaker,
// decided before the charges arrived, a round trip or so). Each admission is
// carried back at most once: a carry-back whose reply is lost is not sent
// again (Redis may have run it). A call whose own reply was lost, though,
// may count twice: Redis may have run its script before the fallback
// admitted it and carried it back. That errs towards denying, by at most the
// calls that failed that way. The heartbeat stops when the last limiter of
// its client is closed ([Limiter.Close]) or the client is. Each beat also
// writes the process's mark, <prefix>{processes}:mark:<member>, a number
// that grows with each write of it, and so does a write every 100 ms while
// Redis admits the process calls, and a probe that finds Redis back: each
// reads the mark Redis held before and its replication ID. A mark older than
// the last one Redis acknowledged (or none), or another replication ID, says
// Redis lost the writes after the mark it holds (a restart, FLUSHALL, a
// failover to a replica that missed them), and the process charges it again
// what Redis had admitted it since then in windows still open (its ledger,
// bounded as the carry-back). On a Cluster each master keeps the marks of
// the keys it holds, <prefix>{processes-<n>}:mark:<member>, and a master
// that lost writes is charged again what the ledger holds of its keys. A
// client (not a Cluster's) that dials another server than its last one, as a
// failover client does when a replica was promoted, holds its commands until
// every limiter on it has written its mark there and charged what it lacks
// (its fence); a call in flight on the server it left that fails then is
// shed (ratelimit.ErrBusy), counted toward no breaker. So a window admits at most its limit plus the fallbacks'
// admissions plus what Redis admitted between the loss and the ledgers'
// arrival (after a failover, the calls inside the client when it dialled;
// else a mark's period, 100 ms, while calls flow); not on a Ring, nor under
// WithFallbackProcesses (docs/reliability.md, What a restart forgets).
//
// # Overrides
//
// [NewOverrides] reads overrides of rules, keys and tiers from a Redis hash
// in the background (the grammar is ratelimit.ParseOverrides'); pass it to
// ratelimit.WithOverrides.
//
// One caveat: a sliding log sets its key's TTL when the log is created or
// trimmed, to two periods past its newest entry. After an override
// lengthens a sliding_log period, a log that is not trimmed again may
// expire on the TTL its old period gave it (at most two old periods and a
// second after the override), forgetting calls that are still inside the
// new, longer window; the next trim sets the new TTL.
//
// The scripts are in lua/, whose README maps each block to its Go twin.
package redislimit
