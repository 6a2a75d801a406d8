
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "sliding_window"
local period, threshold, capacity = 1000000, 100, 100

local ok, rem, ret, res, del = false, 0, 0, 0, 0
    local packed = redis.call("INCRBY", key, costArg) -- as sent: no number to format
    local r, frac = redis.call("PTTL", key) - 1000, 0
    local p = 1000
    local cur = packed % 134217728 - cost
    local prev = (packed - cur - cost) / 134217728
    if packed == cost or r <= 0 then
      local t = redis.call("TIME")
      local now = t[1] * 1000000 + t[2]
      local nowMs = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
      local stateEnd = (now - now % period + 2 * period) / 1000
      if packed == cost then redis.call("PEXPIREAT", key, stateEnd + 1000) else redis.call("SET", key, costArg, "PXAT", stateEnd + 1000) end
      packed, cur, prev, r = cost, 0, 0, stateEnd - nowMs
    elseif r <= p then
      packed, cur, prev = cur * 134217728 + cost, 0, cur
      redis.call("SET", key, packed, "PX", r + p + 1000)
      r = r + p
    end
    local weighted = 0
    if prev > 0 then
      local q, m, covered = 0, 0, r - p
      if covered > p then covered = p end
      m = prev * covered % p; q = (prev * covered - m) / p
      weighted = q
      if m > 0 then weighted = q + 1 end
    end
    res = r * 1000 - frac
    if weighted + cur + cost <= threshold then
      ok, rem = true, threshold - weighted - cur - cost
    else
      redis.call("DECRBY", key, costArg) -- packed > cost: the count was there before
      rem = threshold - weighted - cur
      if rem < 0 then rem = 0 end
      if cur == 0 then res = (r - p) * 1000 - frac end
      local room, weighs, ends = threshold - cur - cost, prev, r - p
      if room < 0 then room, weighs, ends = threshold - cost, cur, r end
      local q = 0
      q = (room * p - room * p % weighs) / weighs
      ret = (ends - q) * 1000 - frac
    end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
local remaining, reset = rem, res
if del == 0 then
  if reset < 2097152 then return (remaining * 2097152 + reset) * 64 + 21 end
end
return {rem, res, del}

