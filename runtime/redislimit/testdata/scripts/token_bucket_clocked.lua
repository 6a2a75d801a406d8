-- decide.lua decides one call against one or more limits atomically, in
-- one script run. MemoryLimiter (package ratelimit, runtime/) is its Go
-- twin and must make the same decisions: each check names the twin's
-- function, and the state as the twin names it.
--
-- This one decides one limit: token_bucket, period 1000000 µs,
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

local now = ARGV[2] + 0
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = ARGV[1] + 0, ARGV[1] end
local key, algo = KEYS[1], "token_bucket"
local period, threshold, capacity = 1000000, 100, 100

-- Check the limit; a check that denies the call leaves the key as it was,
-- and one whose first command fails (WRONGTYPE) has changed nothing. Its
-- block's locals stay in scope for the commit.
local ok, rem, ret, res, del = false, 0, 0, 0, 0
-- token_bucket, leaky_bucket and gcra. Twin: (*bucketState).tatCheck in
-- internal/limitstate/bucket.go.
--
-- State, the twin's bucketState: the key is a string holding the
-- theoretical arrival time (TAT), the time the bucket will be empty of
-- calls (full of tokens), as "tat" or "tat tatFrac": a whole µs plus
-- tatFrac/threshold µs (0 < tatFrac < threshold). A call is admitted when
-- the TAT it leaves, max(TAT, now) + increment, is at most the burst
-- offset ahead of now. A leaky bucket's admitted call waits until
-- max(TAT, now). A clock reading earlier than the TAT starts from the
-- TAT. A call usually runs TIME, GET and SET KEEPTTL (the TAT; SET PX
-- when it enters another second, see "commit bucket").
--
-- Record: newTat, newTatFrac (the TAT with the call), oldTat (the stored
-- TAT's whole µs, for its TTL; see "commit bucket").
local stored = redis.call("GET", key)
-- tat + tatFrac/threshold: max(TAT, now), the twin's tatFrom; oldTat: the
-- TAT's whole µs as stored, for its TTL.
local tat, tatFrac, oldTat = now, 0, nil
if stored then
  local storedTat, storedFrac = tonumber(stored), 0
  if not storedTat then -- "tat tatFrac"
    local sp = string.find(stored, " ", 1, true)
    storedTat, storedFrac = string.sub(stored, 1, sp - 1) + 0, string.sub(stored, sp + 1) + 0
  end
  oldTat = storedTat
  if storedFrac >= threshold then storedTat, storedFrac = storedTat + 1, 0 end -- written under another threshold
  if storedTat >= now then tat, tatFrac = storedTat, storedFrac end
end
-- Written in with the limit, as the twin's limitstate.Plan has them: one
-- unit's increment (the twin's unit, unitFrac), and the burst offset
-- (depth, depthFrac).
local increment, incrementFrac, burstOffset, burstOffsetFrac = 10000, 0, 1000000, 0
if cost ~= 1 then
  if cost * period < BIG then incrementFrac = cost * period % threshold; increment = (cost * period - incrementFrac) / threshold else increment, incrementFrac = muldiv(cost, period, threshold) end
end
-- newTat: the TAT with the call (the twin's addInterval).
local newTat, newTatFrac = tat + increment, tatFrac + incrementFrac
if newTatFrac >= threshold then newTat, newTatFrac = newTat + 1, newTatFrac - threshold end
local room, roomFrac -- the burst offset left unused
if newTat - now < burstOffset or (newTat - now == burstOffset and newTatFrac <= burstOffsetFrac) then
  ok, res = true, newTat - now
  if newTatFrac > 0 then res = res + 1 end
  if algo == "leaky_bucket" then
    del = tat - now
    if tatFrac > 0 then del = del + 1 end
  end
  room, roomFrac = burstOffset - (newTat - now), burstOffsetFrac - newTatFrac
else
  -- retry once newTat - burstOffset comes; reset when tat does
  ret, res = newTat - burstOffset - now, tat - now
  if newTatFrac > burstOffsetFrac then ret = ret + 1 end
  if tatFrac > 0 then res = res + 1 end
  room, roomFrac = burstOffset - (tat - now), burstOffsetFrac - tatFrac
end
-- Remaining: the emission intervals that fit in the room left (the
-- twin's remainingUnits).
if room >= 0 then
  local q, r = 0, 0
  if room * threshold < BIG then r = room * threshold % period; q = (room * threshold - r) / period else q, r = muldiv(room, threshold, period) end
  local s = r + roomFrac -- |s| < 2^51; % rounds towards minus infinity
  q = q + (s - s % period) / period
  if q > 0 then rem = q end
end
if not ok then
  return {0, rem, ret, res, 0, 0}
end
-- Commit the bucket (the twin's (*bucketState).tatCharge): store the TAT
-- with the call. It only grows. Its TTL is set when it enters a second (of
-- a grid from the epoch), to a second past that second's end; within the
-- second it is kept.
local value
if newTatFrac > 0 then value = string.format("%d %d", newTat, newTatFrac) else value = string.format("%d", newTat) end
local second = newTat - newTat % 1000000
if oldTat and oldTat - oldTat % 1000000 == second then
  redis.call("SET", key, value, "KEEPTTL")
else
  redis.call("SET", key, value, "PX", math.ceil((second + 1000000 - now) / 1000) + 1000)
end
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
