
local now = tonumber(ARGV[2])
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "sliding_window"
local period, threshold, capacity = 1000000, 100, 100

local ok, rem, ret, res, del, x, y, z = false, 0, 0, 0, 0
local failed
repeat -- for the check's break
    local v = redis.call("INCRBY", key, costArg) -- as sent: no number to format
    local f = now % 1000
    local nowms = (now - f) / 1000
    local r = redis.call("PEXPIRETIME", key) - 1000 - nowms
    local P = 1000
    local cur = v % 134217728 - cost
    local prev = (v - cur - cost) / 134217728
    if v == cost or r <= 0 then
      local e = (now - now % period + 2 * period) / 1000
      if v == cost then redis.call("PEXPIREAT", key, e + 1000) else redis.call("SET", key, costArg, "PXAT", e + 1000) end
      v, cur, prev, r = cost, 0, 0, e - nowms
    elseif r <= P then
      v, cur, prev = cur * 134217728 + cost, 0, cur
      redis.call("SET", key, v, "PXAT", nowms + r + P + 1000)
      r = r + P
    end
    local weighted = 0
    if prev > 0 then
      local q, m, e = 0, 0, r - P
      if e > P then e = P end
      m = prev * e % P; q = (prev * e - m) / P
      weighted = q
      if m > 0 then weighted = q + 1 end
    end
    res = r * 1000 - f
    if weighted + cur + cost <= threshold then
      ok, rem, x, y = true, threshold - weighted - cur - cost, v, v
    else
      redis.call("DECRBY", key, costArg) -- v > cost: the count was there before
      rem = threshold - weighted - cur
      if rem < 0 then rem = 0 end
      if cur == 0 then res = (r - P) * 1000 - f end
      local u, w, t = threshold - cur - cost, prev, r - P
      if u < 0 then u, w, t = threshold - cost, cur, r end
      local q = 0
      q = (u * P - u * P % w) / w
      ret = (t - q) * 1000 - f
    end
until true
if failed then return failed end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
local remaining, reset = rem, res
if del == 0 then
  if reset < 2097152 then return (remaining * 2097152 + reset) * 64 + 21 end
end
return {rem, res, del}

