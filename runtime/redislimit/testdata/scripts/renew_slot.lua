-- renew_slot.lua renews the lease of the slot a call holds, if it still
-- holds it (its lease did not end, or was not taken back). Its Go twin is
-- (*MemoryLimiter).RenewSlot (runtime/memoryslots.go).
--
-- KEYS[1]  the slot key (see reserve_slot.lua).
-- ARGV[1]  the lease (µs); ARGV[2] the call's token; ARGV[3] the time
--          ("" reads TIME).
--
-- Replies 1 when the slot was held and is renewed, else 0.
local lease, token, slot = ARGV[1] + 0, ARGV[2], KEYS[1]
local now
if ARGV[3] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[3] + 0
end
local score = redis.call("ZSCORE", slot, token)
if not score or score + 0 <= now then
  return 0
end
redis.call("ZADD", slot, "XX", string.format("%d", now + lease), token)

-- The key outlives every lease it holds by a second (keepMs).
local want = math.ceil(lease / 1000) + 1000
if redis.call("PTTL", slot) < want then redis.call("PEXPIRE", slot, want) end
return 1