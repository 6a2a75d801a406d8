-- heartbeat.lua renews a process's member of the heartbeat's sorted set,
-- drops the members whose time has passed, counts those left, and reads
-- the epoch marker.
--
-- KEYS[1]  the sorted set: members scored by when they stop counting (ms
--          since the Unix epoch, the processes' clocks); it expires ttl
--          after the last beat. KEYS[2] the epoch marker.
-- ARGV[1]  the member; ARGV[2] its score; ARGV[3] the lowest score still
--          counting, as ZREMRANGEBYSCORE's "(ms"; ARGV[4] ttl (ms);
--          ARGV[5] a fresh epoch, or "" to read the marker only.
--
-- Replies {members, epoch}: epoch is nil when the marker is absent and
-- ARGV[5] is "".
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
local n = redis.call("ZCARD", KEYS[1])
redis.call("PEXPIRE", KEYS[1], ARGV[4])
local fresh = ARGV[5]
-- The epoch marker: KEYS[2] holds a random value, which only a loss of
-- the server's state (a restart without persistence, FLUSHALL, a
-- failover to a replica that lacked it) takes away; the first process to
-- find it absent sets it to its fresh value, and every process that read
-- the old one then reads another.
local epoch = redis.call("GET", KEYS[2])
if not epoch and fresh ~= "" then
  redis.call("SET", KEYS[2], fresh)
  epoch = fresh
end
return {n, epoch}