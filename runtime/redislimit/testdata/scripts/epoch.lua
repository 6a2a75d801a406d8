-- epoch.lua reads the epoch marker, first setting it when absent.
--
-- KEYS[1]  the heartbeat's sorted set (unused: it names the master);
--          KEYS[2] the epoch marker.
-- ARGV[1]  a fresh epoch.
--
-- Replies the marker.
local fresh = ARGV[1]
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
return epoch