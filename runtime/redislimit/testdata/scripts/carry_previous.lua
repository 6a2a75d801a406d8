-- carry.lua charges units the local fallback admitted in a sliding
-- window's window that has ended to its key, and replies the units
-- charged.
--
-- KEYS[1]  the sliding window's key.
-- ARGV     the start (ms) of the window the units were admitted in, the
--          period (ms), the units, the threshold.
-- Carry back to a sliding window's key units admitted by the local
-- fallback in a window that has ended, where they weigh on the window
-- after it (carry.go, previousScript): to prev when the key's state has
-- moved to that window, to cur when it has not (the next call moves it),
-- or as a new state of that window when there is none; as many as fit
-- under the threshold. The window is told by the key's expiry, which the
-- check sets to the end of the window after the state's, plus keepMs (to
-- the ms, or about it where it moves the state with a relative TTL).
local start, periodMs, units, threshold = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local scale, keep = 134217728, 1000
local expires = redis.call("PEXPIRETIME", KEYS[1])
if expires == -2 then
  if units > threshold then units = threshold end
  redis.call("SET", KEYS[1], units * scale, "PXAT", start + 3 * periodMs + keep)
  return units
end
local packed = tonumber(redis.call("GET", KEYS[1]))
if expires < 0 or not packed then return 0 end
local cur = packed % scale
local prev = (packed - cur) / scale
-- periods: how many periods after start the state ends; the state's
-- window is the one that starts two periods before its end, which may
-- be a ms or so off where a script moved it by a relative TTL.
local periods = math.floor((expires - keep - start + periodMs / 2) / periodMs)
if periods == 2 then
  if units > threshold - cur then units = threshold - cur end
  if units <= 0 then return 0 end
  redis.call("INCRBY", KEYS[1], units)
elseif periods == 3 then
  if units > threshold - prev then units = threshold - prev end
  if units <= 0 then return 0 end
  redis.call("INCRBY", KEYS[1], units * scale)
else
  return 0
end
return units
