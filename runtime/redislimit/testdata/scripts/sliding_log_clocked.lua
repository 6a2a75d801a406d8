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
-- sliding_log. Twin: (*logState).check in internal/limitstate/slidinglog.go.
--
-- State, the twin's logState: the key is a list of entries, oldest first,
-- one per call: "ts" for a call of cost 1, "ts:w" for a call of cost w > 1
-- (its weight), ts the time (µs) its units were logged at, so calls in the
-- same microsecond are all counted (the twin keeps runs of units logged at
-- one time). While the log holds weighted entries it opens with its count,
-- "#x", x the weights' surplus over one unit an entry (the sum of w - 1):
-- its units are its entries plus x, read in O(1) whatever the costs. A
-- log of cost-1 calls only has no count: an entry is a plain integer (at
-- most 10 bytes of a listpack, as before), and the list is what the
-- encoding of one entry per unit wrote, so a log written by it is read as
-- it was (each of its entries weighs 1); that encoding's checks fail on
-- a log with a count (an arithmetic error on "#x", before any write),
-- rather than miscount it (its refunds may fail after removing their
-- entries, before marking the newest left). An entry at ts counts while
-- ts > start = now - period. The call is pushed first and popped again if
-- it does not fit. A call usually runs TIME, LINDEX 0 (has the oldest
-- entry expired? past a count, LINDEX 1 too) and RPUSH (whose reply is
-- the new length, so no LLEN), plus a PEXPIRE when a trim sets the TTL
-- again; a call of cost w > 1 also an LSET or LPUSH of the count.
--
-- TTL: set to two periods (plus a second) past the newest entry, L, when
-- the log is created, and the entry of the call that sets it is marked:
-- stored as -ts (or -ts:w). It is set again (and the new entry marked)
-- only when a trim pops a marked entry or empties the log, not on every
-- trim, as a full window's calls each trim one entry; a refund or settle
-- that takes a marked entry away marks the newest entry left and sets it
-- from that one (a refund that takes part of an entry leaves it, and its
-- mark, in place). So while no TTL is set, a marked entry (logged at L) is
-- in the window, every call comes before L + period, and every entry is
-- logged before it too (at the call's time, or the newest entry's): the
-- TTL outlives them all by a period. The count is not an entry: it lives
-- and expires with them. A call that sets the TTL but is denied (or rolled
-- back) marks the newest entry left in place of its own.
--
-- Held entries (the generic script's, for guard.HeldReserver): a call
-- whose hold (µs, at most a quarter period) is positive logs "ts:w:k",
-- w >= 2, whose units count while ts + k > start (the twin's runs with a
-- hold). A refund leaves such an entry 2 units or none, so while the log
-- holds one x > 0, and its count reads "!x" rather than "#x" from the
-- first held entry until x falls to 0 (or the log empties). The entries
-- stay in time order: a trim drops the oldest entries that stopped
-- counting up to the first held one that still counts, the entries behind
-- it counting until it goes (a hold late at most), and a denial's retry
-- is when every unit up to the need-th has gone. A held entry is always
-- marked (it sets the TTL), and a held log's TTL spans two and a half
-- periods: its marked entry leaves within a period and a quarter, and
-- every entry logged meanwhile counts a period and a quarter at most. An
-- earlier release's checks fail on "!x" (an arithmetic error, before any
-- write); its settles read entries from the newest and fail on a held
-- one, possibly after emptying some ("").
--
-- Clock: if it reads earlier than the oldest entry, the call is logged at
-- the newest entry's time, so the log stays sorted. A clock step back
-- smaller than the log's span is not seen; entries logged then are out of
-- order by at most the step, as are a carry-back's, logged at the times
-- their units were admitted: a trim drops only the leading entries that
-- left the window, never one behind an entry still in it.
--
-- Record: refresh (this call sets the TTL: the TTL's span in periods
-- once admitted), logged, units (the log's units with the call).
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
-- Push the call's entry; RPUSH replies the new length, whence units.
local entry = string.format("%d", logged) -- not tostring: %.14g would round it
if refresh then entry = "-" .. entry end
if cost > 1 then entry = entry .. ":" .. costArg end
local units = redis.call("RPUSH", key, entry) - h + x + cost - 1
if units <= threshold then
  ok, rem, res = true, threshold - units, logged + period - now
  if cost > 1 then
    local more = cost - 1
    if h == 1 then
      redis.call("LSET", key, "0", string.format(held and "!%d" or "#%d", x + more))
    else
      redis.call("LPUSH", key, string.format(held and "!%d" or "#%d", more))
    end
  end
  if refresh then refresh = held and 2.5 or 2 end -- the TTL's span, in periods
else
  -- The call fits once the need-th oldest unit leaves: without a count,
  -- the need-th entry (need <= the units before the call); else the
  -- entry the units from the oldest reach need at (see "find unit").
  local need = units - threshold
  if x == 0 then
    ret = math.abs(redis.call("LINDEX", key, need - 1) + 0)
  else -- h == 1: the count opens the list
    -- Scan from the oldest, 64 entries at a time, past whole runs
    -- whose units (entries plus weights' surplus) fall short of need; far:
    -- the latest time plus hold of the held entries scanned.
    local i, left, far = 1, need, 0
    while left > 0 do
      local run = redis.call("LRANGE", key, i, i + 64 - 1)
      if #run == 0 then break end -- not reached: the call's entry is the last
      local u, all = #run, table.concat(run, ",")
      for w in string.gmatch(all, "%d+:(%d+)") do u = u + w - 1 end
      if u < left then
        left, i = left - u, i + #run
        if held then
          for t, k in string.gmatch(all, "(%d+):%d+:(%d+)") do far = math.max(far, t + k) end
        end
      else
        for j = 1, #run do
          left = left - (string.match(run[j], "^-?%d+:(%d+)") or 1)
          if held then
            local t, k = string.match(run[j], "^-?(%d+):%d+:(%d+)$")
            if t then far = math.max(far, t + k) end
          end
          if left <= 0 then
            ret = math.max(string.match(run[j], "%d+") + 0, far)
            break
          end
        end
      end
    end
  end
  ret = ret + period - now
  redis.call("RPOP", key)
  local last = redis.call("LINDEX", key, "-1") -- units > threshold >= cost
  local newest = string.match(last, "^-?%d+") + 0
  if newest < 0 then
    newest = -newest
  elseif refresh then
    redis.call("LSET", key, "-1", "-" .. last) -- the mark popped with the call
  end
  if refresh then redis.call("PEXPIRE", key, math.ceil((newest + (held and 2.5 or 2) * period - now) / 1000) + 1000) end
  rem, res = threshold - units + cost, newest + period - now
end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
-- Commit sliding_log (the twin's (*logState).charge): the entry is
-- pushed; set the TTL if this call marked it (refresh: the TTL's span).
if refresh then redis.call("PEXPIRE", key, math.ceil((logged + refresh * period - now) / 1000) + 1000) end
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
