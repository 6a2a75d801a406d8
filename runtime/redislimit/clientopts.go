package redislimit

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultTimeout is the dial, read, write and pool timeout that
// [ClientOptions], [ClusterOptions] and [FailoverOptions] give a client
// that sets none.
const DefaultTimeout = 100 * time.Millisecond

// ClientOptions gives opts the client settings that bound what a call costs
// while Redis fails, and returns it: DialTimeout, ReadTimeout, WriteTimeout
// and PoolTimeout of [DefaultTimeout] where they are zero (go-redis
// would wait 5s to dial, 5s to read, and ReadTimeout + 1s for a
// connection), and one attempt per call where MaxRetries and
// DialerRetries are zero (go-redis would try 4 times, dialling 5 times
// each, with back-offs in between). A call Redis cannot decide then costs
// one timeout at most, until the circuit breaker opens (see
// [WithBreaker]). Settings opts already has are kept. Use it on options
// from redis.ParseURL or written by hand:
//
//	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
//	...
//	limiter := ratelimit.New(redis.NewClient(ratelimit.ClientOptions(opts)))
func ClientOptions(opts *redis.Options) *redis.Options {
	boundTimeouts(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout, &opts.PoolTimeout)
	oneAttempt(&opts.MaxRetries, &opts.DialerRetries)
	return opts
}

// ClusterOptions is [ClientOptions] for a Redis Cluster client, whose
// settings apply to the client of each node, and it sets MaxRedirects to
// 1 where it is zero: a call follows one MOVED or ASK redirect (after a
// failover or while a slot moves) and retries a master that failed once,
// instead of three times (go-redis's default), so a master that does not
// answer costs a call at most two timeouts and MinRetryBackoff until that
// master's breaker opens.
func ClusterOptions(opts *redis.ClusterOptions) *redis.ClusterOptions {
	boundTimeouts(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout, &opts.PoolTimeout)
	oneAttempt(&opts.MaxRetries, &opts.DialerRetries)
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = 1
	}
	return opts
}

// FailoverOptions is [ClientOptions] for a failover client of Redis
// Sentinel (redis.NewFailoverClient): the same settings, which go-redis
// applies to its connections to the primary and to the sentinels it asks
// for the primary's address. While no primary answers, a call then costs
// a short timeout or two at most (a new connection asks a sentinel, then
// dials the primary), until the circuit breaker opens; the breaker's probe
// dials through the sentinels, so it finds the primary they promote and
// closes the breaker once that primary answers:
//
//	limiter := redislimit.New(redis.NewFailoverClient(redislimit.FailoverOptions(&redis.FailoverOptions{
//		MasterName:    "mymaster",
//		SentinelAddrs: []string{"sentinel-1:26379", "sentinel-2:26379", "sentinel-3:26379"},
//	})))
func FailoverOptions(opts *redis.FailoverOptions) *redis.FailoverOptions {
	boundTimeouts(&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout, &opts.PoolTimeout)
	oneAttempt(&opts.MaxRetries, &opts.DialerRetries)
	return opts
}

// boundTimeouts sets each zero timeout to DefaultTimeout.
func boundTimeouts(timeouts ...*time.Duration) {
	for _, t := range timeouts {
		if *t == 0 {
			*t = DefaultTimeout
		}
	}
}

// oneAttempt makes a client try a command once, dialling once, unless
// the retries are set.
func oneAttempt(maxRetries, dialerRetries *int) {
	if *maxRetries == 0 {
		*maxRetries = -1
	}
	if *dialerRetries == 0 {
		*dialerRetries = 1
	}
}
