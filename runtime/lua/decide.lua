-- decide.lua decides one call against one or more sliding-log limits
-- atomically, in one script run.
--
-- KEYS[i]  the log of limit i; all keys of one call share a hash tag.
-- ARGV[1]  the time in microseconds, or "" to read the server's clock (TIME).
-- ARGV[2]  the call's cost in units.
-- ARGV[3+4(i-1) .. 6+4(i-1)]  limit i: algorithm, period (µs), threshold,
--          burst/capacity (0 = threshold).
--
-- Returns {allowed (1/0), remaining, retry_after_us, reset_after_us, index}
-- where index (0-based) is the limit the numbers describe: the denying limit
-- with the longest retry when denied, the one with the fewest remaining
-- units when allowed.
--
-- A log is a list of admission times (µs), oldest first; each unit of cost
-- is one entry, so calls in the same microsecond are all counted. An entry
-- at ts counts while ts > now - period.
--
-- Each command a script runs costs a noticeable fraction of a round trip,
-- so an admitted call runs three: TIME, LINDEX 0 (has the oldest entry
-- expired?) and RPUSH, whose reply is the new length, so no LLEN is needed.
-- The call is pushed to every log first and popped again if any limit is
-- exceeded: a denied call leaves every log as it was.
--
-- TTL: a log's TTL is set to two periods (plus a second) past its newest
-- entry whenever it is created or trimmed. A log that was not trimmed since
-- had no entry expire, so every entry pushed since came within one period
-- of that moment, and the TTL outlives them all.
--
-- Clock: if the clock reads earlier than the oldest entry, new entries are
-- logged at the newest entry's time, so the log stays sorted. A clock step
-- back smaller than the log's span is not seen; entries logged then are out
-- of order by at most the step.

local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local cost = tonumber(ARGV[2])
local n = #KEYS

-- trim drops the entries at or before start, given that the oldest is one
-- of them, and returns the new oldest entry (nil when none is left). It
-- pops one and looks again, which is all a steady flow of calls needs,
-- and otherwise gallops for the first live entry and bisects.
local function trim(key, start)
  redis.call("LPOP", key)
  local head = redis.call("LINDEX", key, 0)
  if not head or tonumber(head) > start then
    return head
  end
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
    return nil
  end
  redis.call("LTRIM", key, lo, -1)
  return redis.call("LINDEX", key, 0)
end

-- push appends cost copies of ts and returns the list's new length.
local function push(key, ts)
  local s = string.format("%d", ts) -- not tostring: %.14g would round it
  if cost == 1 then
    return redis.call("RPUSH", key, s)
  end
  local batch = {}
  for j = 1, math.min(cost, 1000) do batch[j] = s end
  local len, left = 0, cost
  while left > 0 do
    local k = math.min(left, 1000)
    len = redis.call("RPUSH", key, unpack(batch, 1, k))
    left = left - k
  end
  return len
end

-- Check and charge every limit; st[3i-2] is limit i's new length, st[3i-1]
-- the time its entries were logged at, st[3i] whether to set its TTL.
local st = {}
local allowed = true
for i = 1, n do
  local key = KEYS[i]
  local start = now - tonumber(ARGV[4 * i])
  local head = redis.call("LINDEX", key, 0)
  local refresh = not head -- a new log
  if head and tonumber(head) <= start then
    head = trim(key, start)
    refresh = true
  end
  local logged = now
  if head and now < tonumber(head) then
    logged = math.max(now, tonumber(redis.call("LINDEX", key, -1)))
  end
  local len = push(key, logged)
  if len > tonumber(ARGV[4 * i + 1]) then allowed = false end
  st[3 * i - 2], st[3 * i - 1], st[3 * i] = len, logged, refresh
end

if allowed then
  -- Report the limit with the fewest remaining units.
  local pick, remaining, reset = 1, nil, 0
  for i = 1, n do
    local period, left = tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 1]) - st[3 * i - 2]
    local logged = st[3 * i - 1]
    if st[3 * i] then
      redis.call("PEXPIRE", KEYS[i], math.ceil((logged + 2 * period - now) / 1000) + 1000)
    end
    if remaining == nil or left < remaining then
      pick, remaining, reset = i, left, logged + period - now
    end
  end
  return {1, remaining, 0, reset, pick - 1}
end

-- Denied: pop the call from every log and report the limit whose retry is
-- the longest.
local pick, remaining, retry, reset = 1, 0, -1, 0
for i = 1, n do
  local key, len = KEYS[i], st[3 * i - 2]
  local period, threshold = tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 1])
  if cost == 1 then redis.call("RPOP", key) else redis.call("RPOP", key, cost) end
  if len > cost then
    local newest = tonumber(redis.call("LINDEX", key, -1))
    if st[3 * i] then
      redis.call("PEXPIRE", key, math.ceil((newest + 2 * period - now) / 1000) + 1000)
    end
    if len > threshold then
      -- The call fits once the (len - threshold)-th oldest entry leaves.
      local wait = tonumber(redis.call("LINDEX", key, len - threshold - 1)) + period - now
      if wait > retry then
        pick, remaining, retry, reset = i, threshold - len + cost, wait, newest + period - now
      end
    end
  end
end
return {0, remaining, retry, reset, pick - 1}
