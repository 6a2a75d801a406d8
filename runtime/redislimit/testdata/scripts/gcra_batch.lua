local function decide_one(KEYS, ARGV)

local now = tonumber(ARGV[2])
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "gcra"
local period, threshold, capacity = 1000000, 100, 100
local fmt = string.format
local BIG = 9007199254740992 -- 2^53: a product below it is exact

local function muldiv(a, b, d)
  local q, half = math.floor(a * b / d), 67108864 -- 2^26
  local a1, b1, q1, d1 = math.floor(a / half), math.floor(b / half), math.floor(q / half), math.floor(d / half)
  local a0, b0, q0, d0 = a - a1 * half, b - b1 * half, q - q1 * half, d - d1 * half
  local mid = (a1 * b0 + a0 * b1) - (q1 * d0 + q0 * d1)
  local r = ((a1 * b1 - q1 * d1) * half + mid) * half + (a0 * b0 - q0 * d0)
  while r < 0 do q, r = q - 1, r + d end
  while r >= d do q, r = q + 1, r - d end
  return q, r
end

local ok, rem, ret, res, del = false, 0, 0, 0, 0
    local stored = redis.call("GET", key)
    local ta, tf, oldTa = now, 0, nil
    if stored then
      local a, b = tonumber(stored), 0
      if not a then -- "a b"
        local sp = string.find(stored, " ", 1, true)
        a, b = tonumber(string.sub(stored, 1, sp - 1)), tonumber(string.sub(stored, sp + 1))
      end
      oldTa = a
      if b >= threshold then a, b = a + 1, 0 end -- written under another threshold
      if a >= now then ta, tf = a, b end
    end
    local k, m, ka, kf = 0, 0, 0, 0
    if cost * period < BIG then m = cost * period % threshold; k = (cost * period - m) / threshold else k, m = muldiv(cost, period, threshold) end
    if capacity * period < BIG then kf = capacity * period % threshold; ka = (capacity * period - kf) / threshold else ka, kf = muldiv(capacity, period, threshold) end
    local na, nf = ta + k, tf + m
    if nf >= threshold then na, nf = na + 1, nf - threshold end
    local d, g -- the room left: d + g/threshold µs
    if na - now < ka or (na - now == ka and nf <= kf) then
      ok, res = true, na - now
      if nf > 0 then res = res + 1 end
      if algo == "leaky_bucket" then
        del = ta - now
        if tf > 0 then del = del + 1 end
      end
      d, g = ka - (na - now), kf - nf
    else
      ret, res = na - ka - now, ta - now
      if nf > kf then ret = ret + 1 end
      if tf > 0 then res = res + 1 end
      d, g = ka - (ta - now), kf - tf
    end
    if d >= 0 then
      local q, r = 0, 0
      if d * threshold < BIG then r = d * threshold % period; q = (d * threshold - r) / period else q, r = muldiv(d, threshold, period) end
      local s = r + g -- |s| < 2^51; % rounds towards minus infinity
      q = q + (s - s % period) / period
      if q > 0 then rem = q end
    end
if not ok then
  return {0, rem, ret, res, 0, 0}
end

      local tat = fmt("%d", na)
      if nf > 0 then tat = fmt("%d %d", na, nf) end
      local second = na - na % 1000000
      if oldTa and oldTa - oldTa % 1000000 == second then
        redis.call("SET", key, tat, "KEEPTTL")
      else
        redis.call("SET", key, tat, "PX", math.ceil((second + 1000000 - now) / 1000) + 1000)
      end
local remaining, reset = rem, res
if del == 0 then
  if reset < 1048576 then return (remaining * 1048576 + reset) * 64 + 20 end
end
return {rem, res, del}


end

local replies, now = {}, nil
for r = 1, tonumber(ARGV[1]) do
  local keys, argv, ti = {KEYS[r]}, {ARGV[2 * r], ARGV[2 * r + 1]}, 2
  if argv[ti] == "" then
    if not now then
      local t = redis.call("TIME")
      now = t[1] * 1000000 + t[2]
    end
    argv[ti] = now
  end
  local ok, reply = pcall(decide_one, keys, argv)
  if not ok then
    if type(reply) == "table" and reply.err then reply = reply.err end
    reply = {err = tostring(reply)}
  end
  replies[r] = reply
end
return replies
