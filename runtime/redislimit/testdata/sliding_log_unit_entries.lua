-- decide.lua decides one call against one or more limits atomically, in
-- one script run. MemoryLimiter (package ratelimit, runtime/) is its Go
-- twin and must make the same decisions: each check names the twin's
-- function, and the state as the twin names it.
--
-- This one decides one limit: sliding_log, period 1000000 µs,
-- threshold 100, capacity 100.
--
-- KEYS[1]  the limit's state.
-- ARGV[1]  the call's cost in units; 1 when absent.
-- ARGV[2]  the time in microseconds.
--
-- Returns the decision (see reply.lua.tmpl): {allowed (1/0), remaining,
-- retry_after_us, reset_after_us, index, delay_us} where index (0-based) is
-- the limit the numbers describe: the denying limit with the longest retry
-- when denied, the one with the fewest remaining units when allowed; delay
-- is the longest delay of all limits; packed into one integer when it is
-- an admission of one limit with no delay whose numbers fit.
--
-- Each limit is checked by its algorithm; the check may change the key
-- tentatively, and undoes that itself if it denies the call. Then every
-- limit is committed if all admitted the call, or those that admitted it
-- are rolled back: a denied call leaves every limit as it was. (The twin
-- checks every limit before it charges any: it has nothing to roll back.)
--
-- Speed: each command a script runs costs a noticeable fraction of a round
-- trip (a write more than a read), and so does each closure it creates, so
-- the checks, commits and rollbacks are written inline, per algorithm, and
-- the paths a call usually takes run few commands (each algorithm's notes
-- list them). Redis (7.0) formats a number passed to redis.call with
-- snprintf ("%.17g"), about 2,000 instructions, and takes a string as it
-- is: the commands every call runs are passed strings (the cost as sent,
-- or "1"; list indices), numbers only those that run once in a while.
-- A string read (ARGV, a reply) becomes a number by arithmetic, x + 0,
-- which converts it once; tonumber(x) converts it twice and is a call, so
-- it is kept for strings that may not be numbers.
--
-- TTL: every key keeps a TTL of at least a second (keepMs) past the time
-- its state stops mattering, and none longer than two periods (a bucket:
-- its drain time plus a second) plus a second; each algorithm says when it
-- sets it.
--
-- Arithmetic: Lua numbers are doubles, exact for integers below 2^53. Times
-- are µs (about 2^50.6 today); a limit's values are validated below 2^50
-- (see maxLimitValue in runtime/limit.go), and a product of two of them
-- that is 2^53 or more goes through muldiv.
--
-- Each algorithm has keys of its own (the key ends in the algorithm's tag,
-- see storageKey in keys.go), so a limit whose algorithm changes starts
-- afresh. A key of another type than its algorithm writes (written by
-- something else) makes the script fail with WRONGTYPE (a window's string
-- that is not an integer: "not an integer"), having charged no
-- limit: in the generic script the first command on each key is a pcall,
-- and the limits checked before are rolled back; a script of one limit has
-- nothing to roll back, and its first command fails before any write.
--
-- Clock: every algorithm is robust to a clock reading earlier than the
-- state's newest time (processes with skewed clocks passing ARGV[1]). Each
-- algorithm's state and notes stand beside its check.

local now = ARGV[2] + 0
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = ARGV[1] + 0, ARGV[1] end
local key, algo = KEYS[1], "sliding_log"
local period, threshold, capacity = 1000000, 100, 100

-- Check the limit; a check that denies the call leaves the key as it was,
-- and one whose first command fails (WRONGTYPE) has changed nothing. Its
-- block's locals stay in scope for the commit.
local ok, rem, ret, res, del = false, 0, 0, 0, 0
-- sliding_log. Twin: (*logState).check in runtime/slidinglog.go.
--
-- State, the twin's logState: the key is a list of admission times (µs),
-- oldest first, one entry per unit of cost, so calls in the same
-- microsecond are all counted; its length is the log's units (the twin
-- keeps runs of units logged at one time). An entry at ts counts while
-- ts > start = now - period. The call is pushed first and popped again if
-- it does not fit. A call usually runs TIME, LINDEX 0 (has the oldest
-- entry expired?) and RPUSH (whose reply is the new length, so no LLEN),
-- plus a PEXPIRE when a trim sets the TTL again.
--
-- TTL: set to two periods (plus a second) past the newest entry, L,
-- when the log is created, and the entries of the call that
-- sets it are marked: stored as -ts. It is set again (and the new
-- entries marked) only when a trim pops a marked entry or empties the
-- log, not on every trim, as a full window's calls each trim one entry.
-- So while no TTL is set, the marked entries (logged at L) are in the
-- window, every call comes before L + period, and every entry is logged
-- before it too (at the call's time, or the newest entry's): the TTL
-- outlives them all by a period. A call that sets the TTL but is denied
-- (or rolled back) marks the newest entry left in place of its own.
--
-- Clock: if it reads earlier than the oldest entry, new entries are
-- logged at the newest entry's time, so the log stays sorted. A clock
-- step back smaller than the log's span is not seen; entries logged
-- then are out of order by at most the step.
--
-- Record: refresh (this call sets the TTL), logged, units (the log's
-- units with the call).
local start = now - period
local head = redis.call("LINDEX", key, "0")
-- oldest: the oldest entry's time; marked: whether it is marked
-- (negative), as the entries pushed by the call that last set the TTL are.
local refresh, oldest, marked = not head, nil, false -- a new log: set the TTL
if head then
  oldest = head + 0
  if oldest < 0 then oldest, marked = -oldest, true end
end
if oldest and oldest <= start then
  -- Trim the entries at or before start (the twin's trim): pop one and
  -- look again, which is all a steady flow of calls needs, else gallop
  -- and bisect. The TTL is set again when a marked entry leaves, or the
  -- log empties.
  refresh = marked
  redis.call("LPOP", key)
  head = redis.call("LINDEX", key, "0")
  oldest = head and math.abs(head + 0)
  if not head then refresh = true end
  if oldest and oldest <= start then
    refresh = true
    local len = redis.call("LLEN", key)
    local lo, hi = 1, 1
    while hi < len and math.abs(redis.call("LINDEX", key, hi) + 0) <= start do
      lo = hi + 1
      hi = hi * 2
    end
    if hi > len then hi = len end
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if math.abs(redis.call("LINDEX", key, mid) + 0) <= start then
        lo = mid + 1
      else
        hi = mid
      end
    end
    if lo >= len then
      redis.call("DEL", key)
      head, oldest = nil, nil
    else
      redis.call("LTRIM", key, lo, "-1")
      head = redis.call("LINDEX", key, "0")
      oldest = math.abs(head + 0)
    end
  end
end
-- logged: the time the call's entries are logged at (the twin's logged).
local logged = now
if oldest and now < oldest then
  logged = math.max(now, math.abs(redis.call("LINDEX", key, "-1") + 0))
end
-- Push cost entries; RPUSH replies the new length: units.
local entry, units = string.format("%d", logged) -- not tostring: %.14g would round it
if refresh then entry = "-" .. entry end
if cost == 1 then
  units = redis.call("RPUSH", key, entry)
else
  -- entries: the cost's entries, pushed 1000 (maxPush) at a time
  local entries, left = {}, cost
  for j = 1, math.min(cost, 1000) do entries[j] = entry end
  while left > 0 do
    local k = math.min(left, 1000)
    units = redis.call("RPUSH", key, unpack(entries, 1, k))
    left = left - k
  end
end
if units <= threshold then
  ok, rem, res = true, threshold - units, logged + period - now
else
  -- The call fits once the need-th oldest entry leaves.
  local need = units - threshold
  ret = math.abs(redis.call("LINDEX", key, need - 1) + 0) + period - now
  if cost == 1 then redis.call("RPOP", key) else redis.call("RPOP", key, cost) end
  local last = redis.call("LINDEX", key, "-1") -- units > threshold >= cost
  local newest = last + 0
  if newest < 0 then
    newest = -newest
  elseif refresh then
    redis.call("LSET", key, "-1", "-" .. last) -- the mark popped with the call
  end
  if refresh then redis.call("PEXPIRE", key, math.ceil((newest + 2 * period - now) / 1000) + 1000) end
  rem, res = threshold - units + cost, newest + period - now
end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
-- Commit sliding_log (the twin's (*logState).charge): the entries are
-- pushed; set the TTL if this call marked them.
if refresh then redis.call("PEXPIRE", key, math.ceil((logged + 2 * period - now) / 1000) + 1000) end
local remaining, reset = rem, res
if del == 0 then
  -- An admitted call of one limit with no delay, whose numbers fit, gets
  -- its decision packed in one integer, (remaining * 2^s + reset_after_us)
  -- * packSlot + s with packSlot = 64 (2^6), where reset_after_us < 2^s:
  -- the array costs both ends more.
  -- reset fits in 20 bits, unless the key holds the longer state of an
  -- earlier period (see PackBits in script.go).
  if reset < 1048576 then return (remaining * 1048576 + reset) * 64 + 20 end
end
return {1, rem, 0, res, 0, del}
