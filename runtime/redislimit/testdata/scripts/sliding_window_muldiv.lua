-- decide.lua decides one call against one or more limits atomically, in
-- one script run. MemoryLimiter (package ratelimit, runtime/) is its Go
-- twin and must make the same decisions: each check names the twin's
-- function, and the state as the twin names it.
--
-- This one decides one limit: sliding_window, period 134217728000 µs,
-- threshold 100, capacity 100.
--
-- KEYS[1]  the limit's state.
-- ARGV[1]  the call's cost in units; 1 when absent.
-- The time is the server's clock (TIME).
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

local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = ARGV[1] + 0, ARGV[1] end
local key, algo = KEYS[1], "sliding_window"
local period, threshold, capacity = 134217728000, 100, 100

-- Check the limit; a check that denies the call leaves the key as it was,
-- and one whose first command fails (WRONGTYPE) has changed nothing. Its
-- block's locals stay in scope for the commit.
local ok, rem, ret, res, del = false, 0, 0, 0, 0
-- sliding_window. Twin: (*windowState).slidingCheck in
-- internal/limitstate/slidingwindow.go.
--
-- State, the twin's windowState: a fixed window (see fixed_window) whose
-- key packs two counts, prev * prevScale + cur with prevScale = 134217728
-- (2^27): prev, the previous window's count, and cur, this one's (the
-- twin's count), below 2^53 as thresholds are below 2^26
-- (MaxSlidingWindowThreshold). Its state ends at stateEnd, with the next
-- window, where cur still weighs. The script moves cur to prev when the
-- call is in the next window. It weighs the previous window's count by
-- the part of it the sliding window still covers, in whole ms, rounded
-- up to whole units; that is exactly
-- prev * (period - elapsed) / period + cur + cost <= threshold. Its
-- commands are a fixed window's, plus a SET PX when it moves on.
--
-- Record: packed, the packed counts with the call.
-- packed: prev * prevScale + cur, with the call's cost in cur; msLeft:
-- ms until the key's state ends, at the next window's end (the twin's
-- slidingWindows); periodMs: the period in ms.
local packed = redis.call("INCRBY", key, costArg) -- as sent: no number to format
local msLeft, frac = redis.call("PTTL", key) - 1000, 0
local periodMs = 134217728
local cur = packed % 134217728 - cost
local prev = (packed - cur - cost) / 134217728
if packed == cost or msLeft <= 0 then
  -- A new window with none before: no counts, or the key's last
  -- millisecond, which is the first of the window after next.
  local t = redis.call("TIME")
  local now = t[1] * 1000000 + t[2]
  local nowMs = t[1] * 1000 + (t[2] - t[2] % 1000) / 1000
  local stateEnd = (now - now % period + 2 * period) / 1000
  if packed == cost then redis.call("PEXPIREAT", key, stateEnd + 1000) else redis.call("SET", key, costArg, "PXAT", stateEnd + 1000) end
  packed, cur, prev, msLeft = cost, 0, 0, stateEnd - nowMs
elseif msLeft <= periodMs then
  -- The next window (once per window): cur becomes prev.
  packed, cur, prev = cur * 134217728 + cost, 0, cur
  redis.call("SET", key, packed, "PX", msLeft + periodMs + 1000)
  msLeft = msLeft + periodMs
end
-- covered: the ms of the previous window the sliding window still
-- covers (msLeft - periodMs), at most periodMs: a clock reading earlier
-- than the window's start decides the call at the start.
local weighted = 0
if prev > 0 then
  local q, m, covered = 0, 0, msLeft - periodMs
  if covered > periodMs then covered = periodMs end
  if prev * covered < BIG then m = prev * covered % periodMs; q = (prev * covered - m) / periodMs else q, m = muldiv(prev, covered, periodMs) end
  weighted = q
  if m > 0 then weighted = q + 1 end
end
res = msLeft * 1000 - frac
if weighted + cur + cost <= threshold then
  ok, rem = true, threshold - weighted - cur - cost
else
  redis.call("DECRBY", key, costArg) -- packed > cost: the count was there before
  rem = threshold - weighted - cur
  if rem < 0 then rem = 0 end
  if cur == 0 then res = (msLeft - periodMs) * 1000 - frac end
  -- The earliest millisecond the weighted count plus cost fits, if
  -- nobody calls: in this window once
  -- prev * (periodMs - elapsed) <= room * periodMs, or in the next, where cur is the previous window's count; weighs:
  -- the count weighed, ends: ms until the window it is weighed in ends.
  local room, weighs, ends = threshold - cur - cost, prev, msLeft - periodMs
  if room < 0 then room, weighs, ends = threshold - cost, cur, msLeft end
  local q = 0
  if room * periodMs < BIG then q = (room * periodMs - room * periodMs % weighs) / weighs else q = muldiv(room, periodMs, weighs) end
  ret = (ends - q) * 1000 - frac
end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
local remaining, reset = rem, res
if del == 0 then
  -- An admitted call of one limit with no delay, whose numbers fit, gets
  -- its decision packed in one integer, (remaining * 2^s + reset_after_us)
  -- * packSlot + s with packSlot = 64 (2^6), where reset_after_us < 2^s:
  -- the array costs both ends more.
  -- reset fits in 38 bits, unless the key holds the longer state of an
  -- earlier period (see PackBits in script.go).
  if reset < 274877906944 then return (remaining * 274877906944 + reset) * 64 + 38 end
end
return {1, rem, 0, res, 0, del}
