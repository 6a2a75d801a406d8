
local now = tonumber(ARGV[2])
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "fixed_window"
local period, threshold, capacity = 1000000, 100, 100

local ok, rem, ret, res, del = false, 0, 0, 0, 0
    local count = redis.call("INCRBY", key, costArg) -- as sent: no number to format
    local frac = now % 1000
    local nowMs = (now - frac) / 1000
    local r = redis.call("PEXPIRETIME", key) - 1000 - nowMs
    if count == cost or r <= 0 then
      local stateEnd = (now - now % period + period) / 1000
      if count == cost then redis.call("PEXPIREAT", key, stateEnd + 1000) else redis.call("SET", key, costArg, "PXAT", stateEnd + 1000) end
      count, r = cost, stateEnd - nowMs
    end
    res = r * 1000 - frac
    if count <= threshold then
      ok, rem = true, threshold - count
    else
      redis.call("DECRBY", key, costArg) -- the count was there before: not zero
      rem, ret = threshold - count + cost, res
    end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
local remaining, reset = rem, res
if del == 0 then
  if reset < 1048576 then return (remaining * 1048576 + reset) * 64 + 20 end
end
return {rem, res, del}

