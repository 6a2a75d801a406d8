-- refund.lua takes back the charge of one call from the limits of one
-- group (their keys share a hash tag), which the decide script with
-- records (decide.lua.tmpl, Lines) admitted and charged, because another
-- group denied the call. Each limit's refund is exact for its algorithm:
-- what is left is what the state would hold had the call never been
-- charged, or for a bucket at most that much more (never less), so a
-- refund never lets through a call that the limit would deny.
--
-- KEYS[i]  the state of limit i of the group.
-- ARGV[1]  the time in microseconds, or "" to read the server's clock (TIME).
-- ARGV[2]  the call's cost in units.
-- ARGV[3+7(i-1) .. 9+7(i-1)]  limit i: algorithm, period (µs), threshold
--          (negated when the limit counts calls: it took 1 unit of the
--          call, whatever ARGV[2]), capacity, and its record as the decide script replied it (a, b,
--          old).
--
-- Returns the number of limits refunded (whose charge was still there).

local BIG = 9007199254740992 -- 2^53: a product below it is exact

-- muldiv returns floor(a * b / d) and the remainder a * b - q * d, exactly,
-- for integers 0 <= a, b < 2^52 and 0 < d < 2^50 whose quotient is below
-- 2^52, when a * b is 2^53 or more (callers handle smaller products with
-- %, exact for them): the quotient is estimated, and the estimate's
-- remainder computed exactly from 26-bit halves of the operands, each
-- partial product below 2^53, then corrected. Its twin is package muldiv
-- (internal/muldiv).
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
local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
local callCost, callCostArg = ARGV[2] + 0, ARGV[2]
local refunded = 0
for i = 1, #KEYS do
  local key, algo = KEYS[i], ARGV[7 * i - 4]
  local period, threshold = ARGV[7 * i - 3] + 0, ARGV[7 * i - 2] + 0
  local cost, costArg = callCost, callCostArg
  if threshold < 0 then threshold, cost, costArg = -threshold, 1, "1" end
  local a, b, old = ARGV[7 * i] + 0, ARGV[7 * i + 1] + 0, ARGV[7 * i + 2]
  if algo == "sliding_log" then
    -- a: the time the call's entry was logged at; b: 1 when it was marked
    -- (the call set the TTL); old: its hold ("" when none). Remove the newest
    -- entry like it (entries of one time, weight and hold are alike), take
    -- its weight off the count, and if it was marked, mark the newest entry
    -- left in its place and set the TTL from it, as a rollback does (see
    -- "rollback sliding_log").
    local entry = string.format("%d", a)
    if b == 1 then entry = "-" .. entry end
    if cost > 1 then entry = entry .. ":" .. costArg end
    if old ~= "" then entry = entry .. ":" .. old end
    if redis.call("LREM", key, "-1", entry) > 0 then
      refunded = refunded + 1
      if cost > 1 then
        local head = redis.call("LINDEX", key, "0")
        local x, gone, held = string.sub(head, 2) + 0, cost - 1, string.byte(head) == 33
        if gone > 0 then
          if x == gone then
            redis.call("LPOP", key)
          else
            redis.call("LSET", key, "0", string.format(held and "!%d" or "#%d", x - gone))
          end
        end
      end
      if b == 1 then
        local last = redis.call("LINDEX", key, "-1")
        if last then
          local newest = string.match(last, "^-?%d+") + 0
          if newest < 0 then
            newest = -newest
          else
            redis.call("LSET", key, "-1", "-" .. last)
          end
          local span = 2 -- periods; 2.5 in a held log (see "held sliding_log")
          if string.byte(redis.call("LINDEX", key, "0")) == 33 then span = 2.5 end
          redis.call("PEXPIRE", key, math.ceil((newest + span * period - now) / 1000) + 1000)
        end
      end
    end
  elseif algo == "fixed_window" or algo == "sliding_window" then
    -- a: the key's PEXPIRETIME after the call, which names its window.
    -- In the same window, take the cost off the count (deleting a key it
    -- would leave at zero); a sliding window that has moved on once holds
    -- the call's units in its previous count (times 2^27); a window that
    -- has ended no longer counts them.
    local exp, units = redis.call("PEXPIRETIME", key), nil
    if exp == a then
      units = cost
    elseif algo == "sliding_window" and exp == a + period / 1000 then
      units = cost * 134217728
    end
    if units then
      local value = redis.call("GET", key)
      if value and value + 0 == units then
        redis.call("DEL", key)
      elseif value then
        redis.call("DECRBY", key, units)
      end
      refunded = refunded + 1
    end
  else -- token_bucket, leaky_bucket, gcra
    -- a + b/threshold: the TAT the call left, newTat; old: the TAT as stored
    -- before it ("" when none). When no call has charged the bucket since
    -- (the TAT is still newTat), store old again. Otherwise the call moved
    -- the TAT from tat = newTat - increment to newTat and later calls moved
    -- it on by their own increments: move it back by the increment, less
    -- what the bucket refilled between tat and now (when positive),
    -- TAT - increment + min(increment, max(0, now - tat)), which is never
    -- earlier than the TAT those calls would have left without this one.
    local stored = redis.call("GET", key)
    local mine = string.format("%d", a)
    if b > 0 then mine = string.format("%d %d", a, b) end
    if stored == mine then
      if old == "" then redis.call("DEL", key) else redis.call("SET", key, old, "KEEPTTL") end
      refunded = refunded + 1
    elseif stored then
      local storedTat, storedFrac = tonumber(stored), 0
      if not storedTat then -- "tat tatFrac"
        local sp = string.find(stored, " ", 1, true)
        storedTat, storedFrac = string.sub(stored, 1, sp - 1) + 0, string.sub(stored, sp + 1) + 0
      end
      if storedFrac >= threshold then storedTat, storedFrac = storedTat + 1, 0 end -- written under another threshold
      local increment, incrementFrac = 0, 0
      if cost * period < BIG then incrementFrac = cost * period % threshold; increment = (cost * period - incrementFrac) / threshold else increment, incrementFrac = muldiv(cost, period, threshold) end
      -- tat + tatFrac/threshold = newTat - increment
      local tat, tatFrac = a - increment, b - incrementFrac
      if tatFrac < 0 then tat, tatFrac = tat - 1, tatFrac + threshold end
      -- refill + refillFrac/threshold = min(increment, max(0, now - tat))
      local refill, refillFrac = now - tat, 0
      if tatFrac > 0 then refill, refillFrac = refill - 1, threshold - tatFrac end
      if refill < 0 then refill, refillFrac = 0, 0 end
      if refill > increment or (refill == increment and refillFrac > incrementFrac) then refill, refillFrac = increment, incrementFrac end
      -- the new TAT: storedTat - increment + refill
      local newTat, newTatFrac = storedTat - increment + refill, storedFrac - incrementFrac + refillFrac
      if newTatFrac < 0 then newTat, newTatFrac = newTat - 1, newTatFrac + threshold elseif newTatFrac >= threshold then newTat, newTatFrac = newTat + 1, newTatFrac - threshold end
      if newTat < storedTat or (newTat == storedTat and newTatFrac < storedFrac) then
        local value
        if newTatFrac > 0 then value = string.format("%d %d", newTat, newTatFrac) else value = string.format("%d", newTat) end
        redis.call("SET", key, value, "KEEPTTL")
        refunded = refunded + 1
      end
    end
  end
end
return refunded
