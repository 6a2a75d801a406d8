-- merge_denials.lua merges a process's pending denial counts of one minute
-- into the minute's Space-Saving summary of the most denied keys, and
-- replies 1. A member the summary lacks when it is full takes the place of
-- the least counted, whose count it inherits, as its error too, so counts
-- only ever overestimate, by at most their error.
--
-- KEYS[1]  the summary: a sorted set, member → denials; KEYS[2] its
--          errors: a sorted set, member → error. Both expire ARGV[2]
--          seconds after the latest merge.
-- ARGV     the summary's size (slots), its TTL in seconds, then member,
--          count and error of each pending key.
local slots = tonumber(ARGV[1])
for i = 3, #ARGV, 3 do
  local m = ARGV[i]
  local c, e = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if not redis.call('ZSCORE', KEYS[1], m) and redis.call('ZCARD', KEYS[1]) >= slots then
    local least = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    local lc = tonumber(least[2])
    redis.call('ZREM', KEYS[1], least[1])
    redis.call('ZREM', KEYS[2], least[1])
    c, e = c + lc, e + lc
  end
  redis.call('ZINCRBY', KEYS[1], c, m)
  if e > 0 then
    redis.call('ZINCRBY', KEYS[2], e, m)
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
return 1
