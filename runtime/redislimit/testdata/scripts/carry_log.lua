-- carry_log.lua charges units the local fallback admitted at a past time
-- to a sliding log's key, deciding nothing, and replies the units
-- charged: 0 when the units no longer count.
--
-- KEYS[1]  the sliding log's key.
-- ARGV     the time (µs) the units were admitted at, the units, the
--          period (µs), and the time now (µs), or "" to read the server's
--          clock (TIME).
local key, at, cost, period = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now
if ARGV[4] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[4])
end
-- Carry back to a sliding log units that the local fallback admitted at
-- a past time, at (carry.go, logScript): one entry at at, inserted where
-- its time puts it, so that the trim drops it once at <= now - period and
-- not before, whatever the log held or took meanwhile. Nothing is decided
-- and nothing is capped: the units were admitted (a carry that decided,
-- or charged at the newest entry's time, could leave admissions out, or
-- count them a period longer, filling the log). An entry behind the
-- newest lives under the TTL that keeps the newest; one at or past it is
-- pushed, and marked, as a call's entry is.
local start = now - period
if at <= start or cost <= 0 then return 0 end
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
local entry = string.format("%d", at)
if cost > 1 then entry = entry .. string.format(":%d", cost) end
local last = first and redis.call("LINDEX", key, "-1")
if not last or at >= math.abs(string.match(last, "^-?%d+") + 0) then
  if refresh then entry = "-" .. entry end
  redis.call("RPUSH", key, entry)
  if refresh then redis.call("PEXPIRE", key, math.ceil((at + (held and 2.5 or 2) * period - now) / 1000) + 1000) end
else
  -- The first entry after at (the newest is one): bisect, the log being
  -- in time order.
  local lo, hi = h, redis.call("LLEN", key) - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if string.match(redis.call("LINDEX", key, mid), "%d+") + 0 > at then hi = mid else lo = mid + 1 end
  end
  redis.call("LINSERT", key, "BEFORE", redis.call("LINDEX", key, lo), entry)
  if refresh then
    -- The mark left with the trim: mark the newest.
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
if cost > 1 then
  local more = cost - 1
  if h == 1 then
    redis.call("LSET", key, "0", string.format(held and "!%d" or "#%d", x + more))
  else
    redis.call("LPUSH", key, string.format(held and "!%d" or "#%d", more))
  end
end
return cost
