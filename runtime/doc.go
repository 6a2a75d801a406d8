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
// A denied call is reported by [Rule.Check] as a [*LimitError], which
// satisfies errors.Is(err, [ErrLimited]) and carries when to retry. Backend
// failures wrap [ErrBackend].
//
// The package is imported as "github.com/ratelimitgen/ratelimitgen/runtime"
// and named ratelimit, so code reads ratelimit.ErrLimited.
package ratelimit
