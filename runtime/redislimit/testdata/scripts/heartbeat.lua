-- heartbeat.lua renews a process's member of the heartbeat's sorted set,
-- drops the members whose time has passed, counts those left, and writes
-- the process's mark, reading the one before.
--
-- KEYS[1]  the sorted set: members scored by when they stop counting (ms
--          since the Unix epoch, the processes' clocks); it expires ttl
--          after the last beat. KEYS[2] the process's mark.
-- ARGV[1]  the member; ARGV[2] its score; ARGV[3] the lowest score still
--          counting, as ZREMRANGEBYSCORE's "(ms"; ARGV[4] ttl (ms);
--          ARGV[5] the mark, or "" to leave it; ARGV[6] how long the
--          mark is kept (ms).
--
-- Replies {members, the mark before (false when none, or when ARGV[5]
-- is ""), the server's replication ID}.
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
local n = redis.call("ZCARD", KEYS[1])
redis.call("PEXPIRE", KEYS[1], ARGV[4])
local mark, keep = ARGV[5], ARGV[6]
-- The mark: KEYS[2] holds the process's latest mark, written in order
-- with its other writes, so a server that lost some of them holds an
-- older one, or none. The server's replication ID names the history of
-- writes it answers from: another server that took over, or one that
-- restarted, has another.
local before = false
if mark ~= "" then
  before = redis.call("SET", KEYS[2], mark, "GET", "PX", keep)
end
local history = string.match(redis.call("INFO", "replication"), "master_replid:(%w+)") or ""
return {n, before, history}