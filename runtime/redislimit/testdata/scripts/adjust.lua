-- adjust.lua changes the charge of a reservation (see reserve.lua): it
-- refunds units, or charges more on top, without deciding anything.
-- MemoryLimiter.Adjust (package ratelimit, runtime/memorysettle.go) is its Go
-- twin and must leave the same state.
--
-- KEYS[i]  the state of limit i; all keys of one call share a hash tag.
-- ARGV[1]  the time in microseconds, or "" to read the server's clock (TIME).
-- ARGV[2]  delta: a refund of -delta units when negative, else a charge of
--          delta more.
-- ARGV[3]  at: the time in µs the reservation was charged at.
-- ARGV[4i .. 4i+3]  limit i: algorithm, period (µs), threshold, capacity
--          (as the generic decide script takes them).
-- ARGV[4+4n]  "" (the generic decide script's peek argument, unused).
-- ARGV[5+4n ...]  the bounds of calendar periods, four per fixed_window
--          limit that has one, whose period is -j, j the index of its
--          first (as the generic decide script takes them): the starts of
--          four windows in a row around at for a refund, around now for a
--          charge on top. A time outside them fails the script before any
--          command, with the time, for the client to send bounds around it
--          (calendarSkewCode in script.go).
--
-- A charge on top is never denied, but takes a limit's state to at most
-- twice its capacity; a refund takes back only what the reservation left
-- that still counts. Replies the number of limits.

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
local delta, at = ARGV[2] + 0, ARGV[3] + 0
local frac = now % 1000
local nowMs = (now - frac) / 1000
local n = #KEYS
-- calendarEnds[i]: the end (ms) of the window of calendar limit i that
-- holds at for a refund, now for a charge on top (the twin's windowEnd).
local calendarEnds = {}
if #ARGV > 4 + 4 * n then
  local t = now
  if delta < 0 then t = at end
  for i = 1, n do
    local b = -ARGV[4 * i + 1]
    if b > 0 then
      if t < ARGV[b] + 0 or t >= ARGV[b + 3] + 0 then
        return redis.error_reply(string.format("CALENDARSKEW %d", t))
      end
      local ends = ARGV[b + 3] + 0
      if t < ARGV[b + 2] + 0 then ends = ARGV[b + 2] + 0 end
      if t < ARGV[b + 1] + 0 then ends = ARGV[b + 1] + 0 end
      calendarEnds[i] = ends / 1000
    end
  end
end
for i = 1, n do
  local key, algo = KEYS[i], ARGV[4 * i]
  local period, threshold, capacity = ARGV[4 * i + 1] + 0, ARGV[4 * i + 2] + 0, ARGV[4 * i + 3] + 0
  if algo == "sliding_log" then
    if delta < 0 then
      -- Twin: (*logState).refund. Take up to -delta units off the entries
      -- logged at at with the refund's hold (ARGV[4+4n], "" for none), newest
      -- first, marked or not, unless they left the window, scanning from the
      -- newest 64 entries at a time: an entry whose units all go is
      -- removed (set to "", then LREM of the ""s), else it keeps the rest of
      -- its weight (and its mark), a held entry 2 units at least (see "check
      -- sliding_log"); the count loses what went. If a marked entry went,
      -- mark the newest entry left and set the TTL from it, as a rollback
      -- does (see "rollback sliding_log").
      local hold = ARGV[4 + 4 * n] or ""
      if at + (tonumber(hold) or 0) > now - period then
        local left, hi = -delta, redis.call("LLEN", key) - 1
        local head = redis.call("LINDEX", key, "0")
        local x, h, held = 0, 0, false
        if head then
          local c = string.byte(head)
          if c == 35 or c == 33 then x, h, held = string.sub(head, 2) + 0, 1, c == 33 end
        end
        local gone, removed, unmarked = 0, 0, false
        while left > 0 and hi >= h do
          local lo = math.max(h, hi - 64 + 1)
          local run = redis.call("LRANGE", key, lo, hi)
          for j = #run, 1, -1 do
            local ts, w, k = string.match(run[j], "^(-?%d+):?(%d*):?(%d*)$")
            ts = ts + 0
            if (ts == at or ts == -at) and k == hold then
              if w == "" then w = 1 else w = w + 0 end
              local d = math.min(left, w)
              if k ~= "" and d == w - 1 then d = d - 1 end -- a held entry keeps 2
              left = left - d
              if d == w then
                redis.call("LSET", key, lo + j - 1, "")
                removed, gone = removed + 1, gone + w - 1
                if ts < 0 then unmarked = true end
              elseif d > 0 then
                local kept = string.format("%d", ts)
                if w - d > 1 then kept = kept .. string.format(":%d", w - d) end
                if k ~= "" then kept = kept .. ":" .. k end
                redis.call("LSET", key, lo + j - 1, kept)
                gone = gone + d
              end
              if left == 0 then break end
            end
          end
          hi = lo - 1
        end
        if removed > 0 then redis.call("LREM", key, -removed, "") end
        if gone > 0 then
          if x == gone then
            redis.call("LPOP", key)
          else
            redis.call("LSET", key, "0", string.format(held and "!%d" or "#%d", x - gone))
          end
        end
        if unmarked then
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
    else
      -- Twin: (*limitstate.State).chargeOnTop of a log: trim the log as a check
      -- does (setting refresh as it does), then push an entry of the units at
      -- the time a call would be logged at, up to twice the threshold in the
      -- window.
      local start = now - period
      local head = redis.call("LINDEX", key, "0")
      -- x: the count (0: none); h: 1 when the list opens with it, else 0 (the
      -- index of the oldest entry); held: the count is "!x", as it is from the
      -- first held entry the log takes (see "held sliding_log") until x falls
      -- to 0; first: the oldest entry; oldest: its time; ends: its time plus
      -- its hold; marked: whether it is marked (negative), as the entry pushed
      -- by the call that last set the TTL is.
      local x, h, held, first = 0, 0, false, head
      if head then
        local c = string.byte(head)
        if c == 35 or c == 33 then
          x, h, held = string.sub(head, 2) + 0, 1, c == 33
          first = redis.call("LINDEX", key, "1")
        end
      end
      local refresh, oldest, marked, ends = not first, nil, false, nil -- a new log: set the TTL
      if first then
        if h == 0 then oldest = first + 0 else oldest = string.match(first, "^-?%d+") + 0 end
        if oldest < 0 then oldest, marked = -oldest, true end
        ends = oldest
        if held then ends = oldest + (string.match(first, "^-?%d+:%d+:(%d+)$") or 0) end
      end
      if ends and ends <= start then
        -- Trim the entries that stopped counting (the twin's trim): those at or
        -- before start, from the oldest up to the first held entry whose hold
        -- keeps it (held: the entries behind it stay until it goes). Pop one
        -- and look again, which is all a steady flow of calls needs, else
        -- gallop and bisect. The TTL is set again when a marked entry leaves,
        -- or the log empties. Past a count, the oldest goes with LREM (its
        -- first match, index 1), or with the count (LPOP 2) when x falls to 0.
        refresh = marked
        if h == 0 then
          redis.call("LPOP", key)
          first = redis.call("LINDEX", key, "0")
          oldest = first and math.abs(first + 0)
          ends = oldest
        else
          local w = string.match(first, "^-?%d+:(%d+)")
          if not w then
            redis.call("LREM", key, "1", first)
          else
            x = x - w + 1
            if x == 0 then
              redis.call("LPOP", key, "2")
            else
              redis.call("LSET", key, "1", string.format(held and "!%d" or "#%d", x))
              redis.call("LPOP", key)
            end
          end
          if x == 0 then h, held = 0, false end
          first = redis.call("LINDEX", key, x == 0 and "0" or "1")
          oldest = first and string.match(first, "%d+") + 0
          ends = oldest
          if held and first then ends = oldest + (string.match(first, "^-?%d+:%d+:(%d+)$") or 0) end
        end
        if not first then refresh = true end
        if ends and ends <= start then
          refresh = true
          local len = redis.call("LLEN", key) - h -- entries
          local lo, hi = 1, 1
          while hi < len and string.match(redis.call("LINDEX", key, h + hi), "%d+") + 0 <= start do
            lo = hi + 1
            hi = hi * 2
          end
          if hi > len then hi = len end
          while lo < hi do
            local mid = math.floor((lo + hi) / 2)
            if string.match(redis.call("LINDEX", key, h + mid), "%d+") + 0 <= start then
              lo = mid + 1
            else
              hi = mid
            end
          end
          -- The first lo entries go, up to the first still in the window (a
          -- carry-back logs units at their past times, so the list may be out
          -- of order there; the twin drops runs from the oldest alike), and up
          -- to a held entry whose hold keeps it; past a count, less their
          -- surplus.
          local gone = redis.call("LRANGE", key, h, h + lo - 1)
          for j = 2, lo do
            if string.match(gone[j], "%d+") + 0 > start then lo = j - 1 break end
          end
          if h == 1 then
            if held then
              for j = 2, lo do
                local t, k = string.match(gone[j], "^-?(%d+):%d+:(%d+)$")
                if t and t + k > start then lo = j - 1 break end
              end
            end
            for w in string.gmatch(table.concat(gone, ",", 1, lo), "%d+:(%d+)") do x = x - w + 1 end
          end
          if lo >= len then
            redis.call("DEL", key)
            x, h, held, first, oldest = 0, 0, false, nil, nil
          else
            if x > 0 then
              redis.call("LSET", key, lo, string.format(held and "!%d" or "#%d", x))
              redis.call("LTRIM", key, lo, "-1")
            else
              redis.call("LTRIM", key, h + lo, "-1")
              h, held = 0, false
            end
            first = redis.call("LINDEX", key, h)
            oldest = string.match(first, "%d+") + 0
          end
        end
      end
      -- logged: the time the call's entry is logged at (the twin's logged).
      local logged = now
      if oldest and now < oldest then
        logged = math.max(now, string.match(redis.call("LINDEX", key, "-1"), "%d+") + 0)
      end
      local more = math.min(delta, 2 * capacity - (redis.call("LLEN", key) - h + x))
      if more > 0 then
        local entry = string.format("%d", logged)
        if refresh then entry = "-" .. entry end
        if more > 1 then entry = entry .. string.format(":%d", more) end
        redis.call("RPUSH", key, entry)
        more = more - 1
        if more > 0 then
          if h == 1 then
            redis.call("LSET", key, "0", string.format(held and "!%d" or "#%d", x + more))
          else
            redis.call("LPUSH", key, string.format(held and "!%d" or "#%d", more))
          end
        end
        if refresh then redis.call("PEXPIRE", key, math.ceil((logged + (held and 2.5 or 2) * period - now) / 1000) + 1000) end
      elseif refresh and first then
        -- Nothing pushed, and the mark left with the trim: mark the newest.
        local last = redis.call("LINDEX", key, "-1")
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
  elseif algo == "fixed_window" or algo == "sliding_window" then
    local periodMs = period / 1000
    -- windowEnd: the end (ms) of the fixed window that holds at for a refund, now
    -- for a charge on top (the twin's windowEnd).
    local windowEnd = calendarEnds[i]
    if not windowEnd and delta < 0 then
      windowEnd = (at - at % period + period) / 1000
    elseif not windowEnd then
      windowEnd = (now - now % period + period) / 1000
    end
    local value = tonumber(redis.call("GET", key) or "0")
    local stateEnd = redis.call("PEXPIRETIME", key) - 1000
    local prev, cur = 0, value
    if algo == "sliding_window" then
      cur = value % 134217728
      prev = (value - cur) / 134217728
    end
    if delta < 0 then
      -- Twin: (*windowState).fixedRefund and slidingRefund. Take up to -delta
      -- units off the count of the window at is in, if it is the key's window
      -- (a sliding window's current one, which ends a period before its state)
      -- and has not ended; delete a key that would hold no counts.
      local ends = stateEnd
      if algo == "sliding_window" then ends = stateEnd - periodMs end
      if cur > 0 and ends == windowEnd and nowMs < ends then
        local d = math.min(-delta, cur)
        if d == value then redis.call("DEL", key) else redis.call("DECRBY", key, d) end
      end
    else
      -- Twin: (*limitstate.State).chargeOnTop of a window: start or move the window
      -- as a check does (fixedWindow, slidingWindows), then add to the window's
      -- count up to twice the threshold (a sliding window's, up to
      -- MaxSlidingWindowThreshold, for its packed key).
      local msLeft = stateEnd - nowMs
      local moved = false
      if value == 0 or msLeft <= 0 then
        cur, prev, moved = 0, 0, true
        stateEnd = windowEnd
        if algo == "sliding_window" then stateEnd = windowEnd + periodMs end
      elseif algo == "sliding_window" and msLeft <= periodMs then
        cur, prev, moved, stateEnd = 0, cur, true, stateEnd + periodMs
      end
      -- most: the most the count may hold; a sliding window's counts are packed
      -- (prev * prevScale + cur), each at most MaxSlidingWindowThreshold, 2^26 - 1.
      local most = 2 * capacity
      if algo == "sliding_window" and most > 134217728 / 2 - 1 then most = 134217728 / 2 - 1 end
      local extra = math.min(delta, most - cur)
      if extra > 0 or moved then
        if extra > 0 then cur = cur + extra end
        redis.call("SET", key, string.format("%d", prev * 134217728 + cur), "PXAT", stateEnd + 1000)
      end
    end
  else -- token_bucket, leaky_bucket, gcra
    -- tat + tatFrac/threshold: max(TAT, now), the twin's tatFrom.
    local stored = redis.call("GET", key)
    local tat, tatFrac = now, 0
    if stored then
      local storedTat, storedFrac = tonumber(stored), 0
      if not storedTat then -- "tat tatFrac"
        local sp = string.find(stored, " ", 1, true)
        storedTat, storedFrac = string.sub(stored, 1, sp - 1) + 0, string.sub(stored, sp + 1) + 0
      end
      if storedFrac >= threshold then storedTat, storedFrac = storedTat + 1, 0 end
      if storedTat >= now then tat, tatFrac = storedTat, storedFrac end
    end
    -- increment: the units' emission intervals, at most twice the capacity's
    -- (more moves the TAT no further).
    local units = math.min(math.abs(delta), 2 * capacity)
    local increment, incrementFrac = 0, 0
    if units * period < BIG then incrementFrac = units * period % threshold; increment = (units * period - incrementFrac) / threshold else increment, incrementFrac = muldiv(units, period, threshold) end
    if delta < 0 then
      -- Twin: (*bucketState).tatRefund. Move the TAT back, not before now: a
      -- full bucket is no state. The TTL is kept: it outlives the TAT.
      if stored and not (tat == now and tatFrac == 0) then
        local newTat, newTatFrac = tat - increment, tatFrac - incrementFrac
        if newTatFrac < 0 then newTat, newTatFrac = newTat - 1, newTatFrac + threshold end
        if newTat < now or (newTat == now and newTatFrac == 0) then
          redis.call("DEL", key)
        else
          local value
          if newTatFrac > 0 then value = string.format("%d %d", newTat, newTatFrac) else value = string.format("%d", newTat) end
          redis.call("SET", key, value, "KEEPTTL")
        end
      end
    else
      -- Twin: (*bucketState).tatChargeOnTop. Move the TAT on, at most twice the
      -- burst offset ahead of now, and set its TTL as a commit does, to a
      -- second past the second it is in.
      local newTat, newTatFrac = tat + increment, tatFrac + incrementFrac
      if newTatFrac >= threshold then newTat, newTatFrac = newTat + 1, newTatFrac - threshold end
      local burstOffset, burstOffsetFrac = 0, 0
      if capacity * period < BIG then burstOffsetFrac = capacity * period % threshold; burstOffset = (capacity * period - burstOffsetFrac) / threshold else burstOffset, burstOffsetFrac = muldiv(capacity, period, threshold) end
      local most, mostFrac = now + 2 * burstOffset, 2 * burstOffsetFrac
      if mostFrac >= threshold then most, mostFrac = most + 1, mostFrac - threshold end
      if newTat > most or (newTat == most and newTatFrac > mostFrac) then newTat, newTatFrac = most, mostFrac end
      local value
      if newTatFrac > 0 then value = string.format("%d %d", newTat, newTatFrac) else value = string.format("%d", newTat) end
      local second = newTat - newTat % 1000000
      redis.call("SET", key, value, "PX", math.ceil((second + 1000000 - now) / 1000) + 1000)
    end
  end
end
return n
