package ratelimit

import (
	"context"
	"time"
)

// decide runs the decide script (lua/decide.lua) for req, which is valid,
// and returns its decision. An error is the client's or a malformed reply
// (*replyError).
func (l *RedisLimiter) decide(ctx context.Context, req *Request) (Decision, error) {
	keys := make([]string, 0, len(req.Limits))
	args := make([]any, 0, 2+4*len(req.Limits))
	keys, args = l.appendCall(keys, args, req, l.now())
	res, err := decideScript.Run(ctx, l.client, keys, args...).Result()
	if err != nil {
		return Decision{}, err
	}
	return parseDecision(res)
}

// now returns the decide script's time argument: the clock's time in
// microseconds, or "" for the script to read the server's clock.
func (l *RedisLimiter) now() any {
	if l.clock != nil {
		return l.clock.Now().UnixMicro()
	}
	return ""
}

// appendCall appends the decide script's KEYS and ARGV for req at time now
// to keys and args.
func (l *RedisLimiter) appendCall(keys []string, args []any, req *Request, now any) ([]string, []any) {
	args = append(args, now, req.cost())
	for i, lim := range req.Limits {
		keys = append(keys, storageKey(l.prefix, req.Name, req.Key, i, lim.algorithm()))
		args = append(args, string(lim.algorithm()), lim.Period.Microseconds(), lim.Threshold, lim.capacity())
	}
	return keys, args
}

// parseDecision decodes the decide script's reply: an array of six
// integers, or for a call admitted by one limit with no delay one integer
// packing remaining and reset (see lua/decide.lua).
func parseDecision(res any) (Decision, error) {
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	switch v := res.(type) {
	case int64:
		if v < 0 {
			break
		}
		s := v & 63
		v >>= 6
		return Decision{Allowed: true, Remaining: v >> s, ResetAfter: us(v & (1<<s - 1))}, nil
	case []any:
		if len(v) != 6 {
			return Decision{}, &replyError{n: len(v)}
		}
		var n [6]int64
		for i, x := range v {
			var ok bool
			if n[i], ok = x.(int64); !ok {
				return Decision{}, &replyError{n: len(v)}
			}
		}
		return Decision{
			Allowed:    n[0] == 1,
			Remaining:  n[1],
			RetryAfter: us(n[2]),
			ResetAfter: us(n[3]),
			Limit:      int(n[4]),
			Delay:      us(n[5]),
		}, nil
	}
	return Decision{}, &replyError{n: 1}
}
