
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "fixed_window"
local period, threshold, capacity = 1000000, 100, 100

local ok, rem, ret, res, del, x, y, z = false, 0, 0, 0, 0
local failed
repeat -- for the check's break
    local v = redis.call("INCRBY", key, costArg) -- as sent: no number to format
    local r, f = redis.call("PTTL", key) - 1000, 0
    if v == cost or r <= 0 then
      local t = redis.call("TIME")
      local now = t[1] * 1000000 + t[2]
      local nowms = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
      local e = (now - now % period + period) / 1000
      if v == cost then redis.call("PEXPIREAT", key, e + 1000) else redis.call("SET", key, costArg, "PXAT", e + 1000) end
      v, r = cost, e - nowms
    end
    res = r * 1000 - f
    if v <= threshold then
      ok, rem, x, y = true, threshold - v, v, v
    else
      redis.call("DECRBY", key, costArg) -- the count was there before: not zero
      rem, ret = threshold - v + cost, res
    end
until true
if failed then return failed end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
local remaining, reset = rem, res
if del == 0 then
  if reset < 1048576 then return (remaining * 1048576 + reset) * 64 + 20 end
end
return {rem, res, del}

