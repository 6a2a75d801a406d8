-- decide.lua decides one call against one or more limits atomically, in
-- one script run. MemoryLimiter is its Go twin and must make the same
-- decisions (see memory.go and the file of each algorithm).
--
-- KEYS[i]  the state of limit i; all keys of one call share a hash tag.
-- ARGV[1]  the time in microseconds, or "" to read the server's clock (TIME).
-- ARGV[2]  the call's cost in units.
-- ARGV[3+4(i-1) .. 6+4(i-1)]  limit i: algorithm, period (µs), threshold,
--          capacity (the burst of token_bucket and gcra, the queue bound
--          of leaky_bucket, else the threshold).
--
-- Returns {allowed (1/0), remaining, retry_after_us, reset_after_us, index,
-- delay_us} where index (0-based) is the limit the numbers describe: the
-- denying limit with the longest retry when denied, the one with the fewest
-- remaining units when allowed; delay is the longest delay of all limits.
-- An admitted call of one limit with no delay, whose numbers fit, gets one
-- integer instead, (remaining * 2^s + reset_after_us) * 64 + s, where
-- reset_after_us < 2^s: an array reply costs both ends more.
--
-- Each limit is checked by its algorithm; the check may change the key
-- tentatively, and undoes that itself if it denies the call. Then every
-- limit is committed if all admitted the call, or those that admitted it
-- are rolled back: a denied call leaves every limit as it was.
--
-- Speed: each command a script runs costs a noticeable fraction of a round
-- trip (a write more than a read), and so does each closure it creates, so
-- the checks, commits and rollbacks are written inline, per algorithm, in
-- the loops below, and the paths a call usually takes run few commands:
--
--   sliding_log     TIME, LINDEX 0 (has the oldest entry expired?), RPUSH
--                   (whose reply is the new length, so no LLEN)
--   fixed_window    TIME, HINCRBY (the window's count, optimistically)
--   sliding_window  TIME, HINCRBY (optimistically), HGET (the previous)
--   token_bucket,   TIME, GET, SET KEEPTTL (the TAT)
--   leaky_bucket,
--   gcra
--
-- plus a PEXPIRE when a log is trimmed or a window starts, and SET PX
-- instead of KEEPTTL when a TAT enters another second.
--
-- TTL: every write leaves a key a TTL of at least a second past the time
-- its state stops mattering: a log two periods past its newest entry, set
-- when the log is created or trimmed (see sliding_log); a fixed window the
-- window's end, set when the window starts; a sliding window the end of the
-- next window (the count still weighs there), set when the window starts; a
-- bucket the end of the second its TAT is in, set when the TAT enters that
-- second (SET KEEPTTL otherwise: a computed PX costs a fraction of a round
-- trip). So no TTL is longer than two periods (a bucket: its drain time plus
-- a second) plus a second.
--
-- Arithmetic: Lua numbers are doubles, exact for integers below 2^53. Times
-- are µs (about 2^50.6 today); a limit's values are validated below 2^50
-- (see maxLimitValue in limit.go), and a product of two of them that is
-- 2^53 or more goes through muldiv.
--
-- Each algorithm has keys of its own (the key ends in the algorithm's tag,
-- see storageKey in key.go), so a limit whose algorithm changes starts
-- afresh. A key of another type than its algorithm writes (written by
-- something else) makes the script fail with WRONGTYPE, having charged no
-- limit: the first command on each key is a pcall, and the limits checked
-- before are rolled back.
--
-- Clock: every algorithm is robust to a clock reading earlier than the
-- state's newest time (processes with skewed clocks passing ARGV[1]): a log
-- logs at its newest entry's time, a window counts in its clock's window if
-- that has a count (the one before the newest), else in the newest, and a
-- bucket starts from its TAT.
--
-- sliding_log: a list of admission times (µs), oldest first; each unit of
-- cost is one entry, so calls in the same microsecond are all counted. An
-- entry at ts counts while ts > now - period. The call is pushed first and
-- popped again if it does not fit. Its TTL is set to two periods (plus a
-- second) past its newest entry whenever it is created or trimmed. A log
-- that was not trimmed since had no entry expire, so every entry pushed
-- since came within one period of that moment, and the TTL outlives them
-- all. If the clock reads earlier than the oldest entry, new entries are
-- logged at the newest entry's time, so the log stays sorted. A clock step
-- back smaller than the log's span is not seen; entries logged then are out
-- of order by at most the step.
--
-- fixed_window and sliding_window: a hash from window start (µs, "%d") to
-- the count admitted in that window. Counts are never zero: a field is
-- deleted rather than decremented to zero. Both increment the count
-- first and decrement it again if the call does not fit. A sliding window
-- weighs the previous window's count by the part of it the sliding
-- window still covers, rounded up to whole units; that is exactly
-- prev * (period - elapsed) / period + cur + cost <= threshold.
--
-- token_bucket, leaky_bucket and gcra: a string holding the theoretical
-- arrival time (TAT), the time the bucket will be empty of calls (full of
-- tokens), as "a" or "a b": a whole µs plus b/threshold µs (0 < b <
-- threshold), so that emission intervals of period/threshold µs add up
-- exactly. A call is admitted when the TAT it leaves, max(TAT, now) +
-- cost * period / threshold, is at most capacity * period / threshold
-- ahead of now. A leaky bucket's admitted call waits until max(TAT, now).

local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local cost = tonumber(ARGV[2])
local n = #KEYS
local fmt = string.format
local BIG = 9007199254740992 -- 2^53: a product below it is exact

-- muldiv returns floor(a * b / d) and the remainder a * b - q * d, exactly,
-- for integers 0 <= a, b < 2^52 and 0 < d < 2^50 whose quotient is below
-- 2^52, when a * b is 2^53 or more (callers handle smaller products with
-- %, exact for them): the quotient is estimated, and the estimate's remainder computed
-- exactly from 26-bit halves of the operands, each partial product below
-- 2^53, then corrected.
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

-- Check every limit. ok, rem, ret, res, del: whether the limit admits the
-- call, remaining, retry, reset and delay; x, y, z: what its commit or
-- rollback needs, kept in ux, uy, uz for one limit, in undo for several.
local allowed, pick, remaining, retry, reset, delay = true, 1, 0, -1, 0, 0
local failed, undo, ux, uy, uz
if n > 1 then undo = {} end
for i = 1, n do
  local key, algo = KEYS[i], ARGV[4 * i - 1]
  local period, threshold = tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 1])
  local ok, rem, ret, res, del, x, y, z = false, 0, 0, 0, 0

  if algo == "sliding_log" then
    local start = now - period
    local head = redis.pcall("LINDEX", key, 0)
    if type(head) == "table" then failed = head break end
    local refresh = not head -- a new log
    if head and tonumber(head) <= start then
      -- Trim the entries at or before start: pop one and look again, which
      -- is all a steady flow of calls needs, else gallop and bisect.
      refresh = true
      redis.call("LPOP", key)
      head = redis.call("LINDEX", key, 0)
      if head and tonumber(head) <= start then
        local len = redis.call("LLEN", key)
        local lo, hi = 1, 1
        while hi < len and tonumber(redis.call("LINDEX", key, hi)) <= start do
          lo = hi + 1
          hi = hi * 2
        end
        if hi > len then hi = len end
        while lo < hi do
          local mid = math.floor((lo + hi) / 2)
          if tonumber(redis.call("LINDEX", key, mid)) <= start then
            lo = mid + 1
          else
            hi = mid
          end
        end
        if lo >= len then
          redis.call("DEL", key)
          head = nil
        else
          redis.call("LTRIM", key, lo, -1)
          head = redis.call("LINDEX", key, 0)
        end
      end
    end
    local logged = now
    if head and now < tonumber(head) then
      logged = math.max(now, tonumber(redis.call("LINDEX", key, -1)))
    end
    -- Push cost entries; RPUSH replies the new length.
    local s, len = fmt("%d", logged) -- not tostring: %.14g would round it
    if cost == 1 then
      len = redis.call("RPUSH", key, s)
    else
      local batch, left = {}, cost
      for j = 1, math.min(cost, 1000) do batch[j] = s end
      while left > 0 do
        local k = math.min(left, 1000)
        len = redis.call("RPUSH", key, unpack(batch, 1, k))
        left = left - k
      end
    end
    if len <= threshold then
      ok, rem, res, x, y, z = true, threshold - len, logged + period - now, refresh, logged, len
    else
      -- The call fits once the (len - threshold)-th oldest entry leaves.
      ret = tonumber(redis.call("LINDEX", key, len - threshold - 1)) + period - now
      if cost == 1 then redis.call("RPOP", key) else redis.call("RPOP", key, cost) end
      local newest = tonumber(redis.call("LINDEX", key, -1)) -- len > threshold >= cost
      if refresh then redis.call("PEXPIRE", key, math.ceil((newest + 2 * period - now) / 1000) + 1000) end
      rem, res = threshold - len + cost, newest + period - now
    end

  elseif algo == "fixed_window" then
    local w = now - now % period
    local f = fmt("%d", w)
    local cnt = redis.pcall("HINCRBY", key, f, ARGV[2]) -- as sent: no number to format
    if type(cnt) == "table" then failed = cnt break end
    if cnt == cost and redis.call("HLEN", key) > 1 then
      -- A new window (once per window) in a hash with others: delete the
      -- older ones, and if the clock reads earlier than a newer one, count
      -- in that one instead.
      local all, newest, old = redis.call("HGETALL", key), w, {}
      for j = 1, #all, 2 do
        if all[j] ~= f and tonumber(all[j]) > newest then newest = tonumber(all[j]) end
      end
      for j = 1, #all, 2 do
        if all[j] ~= f and tonumber(all[j]) < newest then old[#old + 1] = all[j] end
      end
      if newest > w then old[#old + 1] = f end
      if #old > 0 then redis.call("HDEL", key, unpack(old)) end
      if newest > w then
        w, f = newest, fmt("%d", newest)
        cnt = redis.call("HINCRBY", key, f, cost)
      end
    end
    if cnt == cost then -- a new window
      redis.call("PEXPIRE", key, math.ceil((w + period - now) / 1000) + 1000)
    end
    res = w + period - now
    if cnt <= threshold then
      ok, rem, x, y = true, threshold - cnt, f, cnt
    else
      redis.call("HINCRBY", key, f, -cost) -- the count was there before: not zero
      rem, ret = threshold - cnt + cost, res
    end

  elseif algo == "sliding_window" then
    local w = now - now % period
    local f = fmt("%d", w)
    local cnt = redis.pcall("HINCRBY", key, f, ARGV[2]) -- as sent: no number to format
    if type(cnt) == "table" then failed = cnt break end
    local at, prev = now, 0
    if cnt == cost then
      -- A new window (once per window): delete the ones before the
      -- previous, and if the clock reads earlier than a newer window,
      -- count in that one instead.
      local all, newest, old = redis.call("HGETALL", key), w, {}
      for j = 1, #all, 2 do
        if all[j] ~= f and tonumber(all[j]) > newest then newest = tonumber(all[j]) end
      end
      if newest > w then old[1] = f end
      for j = 1, #all, 2 do
        if all[j] ~= f then
          local s = tonumber(all[j])
          if s == newest - period then
            prev = tonumber(all[j + 1])
          elseif s < newest - period then
            old[#old + 1] = all[j]
          end
        end
      end
      if #old > 0 then redis.call("HDEL", key, unpack(old)) end
      if newest > w then
        w, f, at = newest, fmt("%d", newest), newest
        cnt = redis.call("HINCRBY", key, f, cost)
      else
        redis.call("PEXPIRE", key, math.ceil((w + 2 * period - now) / 1000) + 1000)
      end
    else
      prev = tonumber(redis.call("HGET", key, fmt("%d", w - period))) or 0
    end
    local cur, weighted = cnt - cost, 0
    if prev > 0 then
      local q, r, e = 0, 0, period - (at - w)
      if prev * e < BIG then r = prev * e % period; q = (prev * e - r) / period else q, r = muldiv(prev, e, period) end
      weighted = q
      if r > 0 then weighted = q + 1 end
    end
    if weighted + cnt <= threshold then
      ok, rem, res, x, y = true, threshold - weighted - cnt, w + 2 * period - now, f, cnt
    else
      if cnt == cost then redis.call("HDEL", key, f) else redis.call("HINCRBY", key, f, -cost) end
      rem, res = threshold - weighted - cur, w + 2 * period - now
      if rem < 0 then rem = 0 end
      if cur == 0 then res = w + period - now end
      -- The earliest time the weighted count plus cost fits, if nobody
      -- calls: in this window once prev * (period - elapsed) <= room *
      -- period, or in the next, where cur is the previous window's count.
      local u, v, t = threshold - cur - cost, prev, w + period
      if u < 0 then u, v, t = threshold - cost, cur, w + 2 * period end
      local q = 0
      if u * period < BIG then q = (u * period - u * period % v) / v else q = muldiv(u, period, v) end
      ret = t - q - now
    end

  else -- token_bucket, leaky_bucket, gcra
    local capacity = tonumber(ARGV[4 * i + 2])
    local v = redis.pcall("GET", key)
    if type(v) == "table" then failed = v break end
    local ta, tf, old = now, 0, nil
    if v then
      local a, b = tonumber(v), 0
      if not a then -- "a b"
        local sp = string.find(v, " ", 1, true)
        a, b = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
      end
      old = a
      if b >= threshold then a, b = a + 1, 0 end -- written under another threshold
      if a >= now then ta, tf = a, b end
    end
    -- na + nf/threshold: the TAT with the call; ka + kf/threshold: the
    -- capacity in µs.
    local k, m, ka, kf = 0, 0, 0, 0
    if cost * period < BIG then m = cost * period % threshold; k = (cost * period - m) / threshold else k, m = muldiv(cost, period, threshold) end
    if capacity * period < BIG then kf = capacity * period % threshold; ka = (capacity * period - kf) / threshold else ka, kf = muldiv(capacity, period, threshold) end
    local na, nf = ta + k, tf + m
    if nf >= threshold then na, nf = na + 1, nf - threshold end
    local d, g -- the room left: d + g/threshold µs
    if na - now < ka or (na - now == ka and nf <= kf) then
      ok, res, x, y, z = true, na - now, na, nf, old
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
    -- Remaining: the emission intervals that fit in the room left.
    if d >= 0 then
      local q, r = 0, 0
      if d * threshold < BIG then r = d * threshold % period; q = (d * threshold - r) / period else q, r = muldiv(d, threshold, period) end
      local s = r + g -- |s| < 2^51; % rounds towards minus infinity
      q = q + (s - s % period) / period
      if q > 0 then rem = q end
    end
  end

  if ok then
    if undo then undo[i] = {x, y, z} else ux, uy, uz = x, y, z end
    if allowed and (i == 1 or rem < remaining) then
      pick, remaining, reset = i, rem, res
    end
    if del > delay then delay = del end
  elseif allowed or ret > retry then
    allowed, pick, remaining, retry, reset = false, i, rem, ret, res
  end
end

-- Commit every limit, or roll back those that admitted the call.
local commit = allowed and not failed
for i = 1, n do
  local x, y, z = ux, uy, uz
  if undo then
    local u = undo[i]
    if u then x, y, z = u[1], u[2], u[3] else x = nil end
  end
  local key, algo, period = KEYS[i], ARGV[4 * i - 1], tonumber(ARGV[4 * i])
  if x == nil then
    -- limit i did not admit the call (or was not checked): nothing to do
  elseif commit then
    if algo == "sliding_log" then
      if x then redis.call("PEXPIRE", key, math.ceil((y + 2 * period - now) / 1000) + 1000) end
    elseif algo ~= "fixed_window" and algo ~= "sliding_window" then
      local v = fmt("%d", x)
      if y > 0 then v = fmt("%d %d", x, y) end
      -- The TAT only grows. Its TTL is set when it enters a second (of a
      -- grid from the epoch), to a second past that second's end; within
      -- the second it is kept.
      local cell = x - x % 1000000
      if z and z - z % 1000000 == cell then
        redis.call("SET", key, v, "KEEPTTL")
      else
        redis.call("SET", key, v, "PX", math.ceil((cell + 1000000 - now) / 1000) + 1000)
      end
    end
  elseif algo == "sliding_log" then
    if cost == 1 then redis.call("RPOP", key) else redis.call("RPOP", key, cost) end
    if z > cost then
      local newest = tonumber(redis.call("LINDEX", key, -1))
      if x then redis.call("PEXPIRE", key, math.ceil((newest + 2 * period - now) / 1000) + 1000) end
    end
  elseif algo == "fixed_window" or algo == "sliding_window" then
    if y == cost then
      redis.call("HDEL", key, x)
    else
      redis.call("HINCRBY", key, x, -cost)
    end
  end
end
if failed then return failed end
if not allowed then
  return {0, remaining, retry, reset, pick - 1, 0}
end
if n == 1 and delay == 0 then
  -- s: the bits reset takes, of a few sizes.
  local s, p = 46, 70368744177664
  if reset < 1048576 then s, p = 20, 1048576
  elseif reset < 134217728 then s, p = 27, 134217728
  elseif reset < 8589934592 then s, p = 33, 8589934592
  elseif reset < 1099511627776 then s, p = 40, 1099511627776
  end
  if reset < p and remaining * p < 140737488355328 then -- 2^47
    return (remaining * p + reset) * 64 + s
  end
end
return {1, remaining, 0, reset, pick - 1, delay}
