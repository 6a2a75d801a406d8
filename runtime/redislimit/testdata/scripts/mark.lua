-- mark.lua writes the process's mark, reading the one before.
--
-- KEYS[1]  the heartbeat's sorted set (unused: it names the master);
--          KEYS[2] the process's mark.
-- ARGV[1]  the mark; ARGV[2] how long it is kept (ms).
--
-- Replies {the mark before (false when none), the server's replication
-- ID}.
local mark, keep = ARGV[1], ARGV[2]
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
return {before, history}