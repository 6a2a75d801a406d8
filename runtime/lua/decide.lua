-- decide.lua decides one call against one or more limits atomically.
--
-- KEYS[i]  the state of limit i; all keys of one call share a hash tag.
-- ARGV[1]  the time in microseconds, or "" to read the server's clock (TIME).
-- ARGV[2]  the call's cost in units.
-- ARGV[3+4(i-1) .. 6+4(i-1)]  limit i: algorithm, period (µs), threshold,
--          burst/capacity (0 = threshold).
--
-- Every limit is checked first; only when all admit the call is each one
-- charged, so a denied call costs nothing anywhere.
--
-- Returns {allowed (1/0), remaining, retry_after_us, reset_after_us, index}
-- where index (0-based) is the limit the numbers describe: the denying limit
-- with the longest retry when denied, the one with the fewest remaining
-- units when allowed.

local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local cost = tonumber(ARGV[2])

-- Lua 5.1 would print large numbers in %.14g; Redis needs exact integers.
local function int(n)
  return string.format("%d", n)
end

-- Sliding log: the key is a list of admission times (µs), oldest first.
-- An entry at time ts counts while ts > now - period. Each unit of cost is
-- one entry, so calls in the same microsecond are all counted. Entries are
-- never older than the tail, so the list stays sorted even if the clock
-- steps back.

-- log_trim drops the entries that left the window and returns the count.
local function log_trim(key, start)
  local n = redis.call("LLEN", key)
  if n == 0 or tonumber(redis.call("LINDEX", key, 0)) > start then
    return n
  end
  -- Gallop from the head for the first live entry, then bisect.
  local lo, hi = 1, 1
  while hi < n and tonumber(redis.call("LINDEX", key, hi)) <= start do
    lo = hi + 1
    hi = hi * 2
  end
  if hi > n then hi = n end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call("LINDEX", key, mid)) <= start then
      lo = mid + 1
    else
      hi = mid
    end
  end
  if lo >= n then
    redis.call("DEL", key)
  else
    redis.call("LTRIM", key, lo, -1)
  end
  return n - lo
end

local function log_check(key, period, threshold)
  local n = log_trim(key, now - period)
  local st = {key = key, period = period, n = n}
  if n > 0 then
    st.tail = tonumber(redis.call("LINDEX", key, -1))
  end
  if n + cost <= threshold then
    st.remaining = threshold - n - cost
    st.reset = math.max(now, st.tail or now) + period - now
    return true, st
  end
  -- The call fits once the (n + cost - threshold)-th oldest entry leaves.
  local oldest = tonumber(redis.call("LINDEX", key, n + cost - threshold - 1))
  st.remaining = threshold - n
  st.retry = oldest + period - now
  st.reset = st.tail + period - now
  return false, st
end

local function log_charge(st)
  local ts = int(math.max(now, st.tail or now))
  local batch = {}
  for i = 1, math.min(cost, 1000) do
    batch[i] = ts
  end
  local left = cost
  while left > 0 do
    local k = math.min(left, 1000)
    redis.call("RPUSH", st.key, unpack(batch, 1, k))
    left = left - k
  end
  -- Keep the key a second past its last entry's window.
  redis.call("PEXPIRE", st.key, math.ceil(st.reset / 1000) + 1000)
end

local algorithms = {
  sliding_log = {check = log_check, charge = log_charge},
}

local states = {}
local allowed = true
local pick, pick_remaining, pick_retry = 0, nil, -1
for i = 1, #KEYS do
  local base = 3 + 4 * (i - 1)
  local algo = algorithms[ARGV[base]]
  local ok, st = algo.check(KEYS[i], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]))
  st.algo = algo
  states[i] = st
  if not ok then
    if allowed or st.retry > pick_retry then
      pick, pick_retry = i, st.retry
    end
    allowed = false
  elseif allowed and (pick_remaining == nil or st.remaining < pick_remaining) then
    pick, pick_remaining = i, st.remaining
  end
end

if allowed then
  for i = 1, #KEYS do
    states[i].algo.charge(states[i])
  end
end

local st = states[pick]
return {allowed and 1 or 0, st.remaining, st.retry or 0, st.reset, pick - 1}
