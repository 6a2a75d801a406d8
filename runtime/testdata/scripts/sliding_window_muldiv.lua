
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "sliding_window"
local period, threshold, capacity = 134217728000, 100, 100
local BIG = 9007199254740992 -- 2^53: a product below it is exact

local function muldiv(a, b, d)
  local q, L = math.floor(a * b / d), 67108864
  local a1, b1, q1, d1 = math.floor(a / L), math.floor(b / L), math.floor(q / L), math.floor(d / L)
  local a0, b0, q0, d0 = a - a1 * L, b - b1 * L, q - q1 * L, d - d1 * L
  local mid = (a1 * b0 + a0 * b1) - (q1 * d0 + q0 * d1)
  local r = ((a1 * b1 - q1 * d1) * L + mid) * L + (a0 * b0 - q0 * d0)
  while r < 0 do q, r = q - 1, r + d end
  while r >= d do q, r = q + 1, r - d end
  return q, r
end

local ok, rem, ret, res, del, x, y, z = false, 0, 0, 0, 0
local failed
repeat -- for the check's break
    local v = redis.call("INCRBY", key, costArg) -- as sent: no number to format
    local r, f = redis.call("PTTL", key) - 1000, 0
    local P = 134217728
    local cur = v % 134217728 - cost
    local prev = (v - cur - cost) / 134217728
    if v == cost or r <= 0 then
      local t = redis.call("TIME")
      local now = t[1] * 1000000 + t[2]
      local nowms = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
      local e = (now - now % period + 2 * period) / 1000
      if v == cost then redis.call("PEXPIREAT", key, e + 1000) else redis.call("SET", key, costArg, "PXAT", e + 1000) end
      v, cur, prev, r = cost, 0, 0, e - nowms
    elseif r <= P then
      v, cur, prev = cur * 134217728 + cost, 0, cur
      redis.call("SET", key, v, "PX", r + P + 1000)
      r = r + P
    end
    local weighted = 0
    if prev > 0 then
      local q, m, e = 0, 0, r - P
      if e > P then e = P end
      if prev * e < BIG then m = prev * e % P; q = (prev * e - m) / P else q, m = muldiv(prev, e, P) end
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
      if u * P < BIG then q = (u * P - u * P % w) / w else q = muldiv(u, P, w) end
      ret = (t - q) * 1000 - f
    end
until true
if failed then return failed end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
local remaining, reset = rem, res
if del == 0 then
  if reset < 274877906944 then return (remaining * 274877906944 + reset) * 64 + 38 end
end
return {rem, res, del}

