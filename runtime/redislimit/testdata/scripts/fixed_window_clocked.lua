-- decide.lua decides one call against one or more limits atomically, in
-- one script run. MemoryLimiter (package ratelimit, runtime/) is its Go
-- twin and must make the same decisions: each check names the twin's
-- function, and the state as the twin names it.
--
-- This one decides one limit: fixed_window, period 1000000 µs,
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
local key, algo = KEYS[1], "fixed_window"
local period, threshold, capacity = 1000000, 100, 100

-- Check the limit; a check that denies the call leaves the key as it was,
-- and one whose first command fails (WRONGTYPE) has changed nothing. Its
-- block's locals stay in scope for the commit.
local ok, rem, ret, res, del = false, 0, 0, 0, 0
-- fixed_window. Twin: (*windowState).fixedCheck in internal/limitstate/fixedwindow.go.
--
-- State, the twin's windowState: the key is a string holding count, the
-- window's count, whose state ends with the window at stateEnd (a Unix
-- time in ms: periods are whole ms); the key expires exactly 1000 ms
-- (keepMs) after it. So the key's TTL tells where in the window a call
-- is, and a script that does not know the time (one limit's, on the
-- server's clock) reads it (PTTL, an integer) instead of TIME, except
-- when a window starts; the others read PEXPIRETIME against now, so that
-- a pinned clock decides as the server's would (see "ttl"). The state's
-- end is the next window's first ms: there, msLeft = 0 means the window
-- has ended, and the key, still there for a second, is overwritten. A window
-- starts when the key has no count (INCRBY replies the cost) or has
-- ended. Counts are never zero: a key is deleted rather than decremented
-- to zero. The count is incremented first and decremented again if the
-- call does not fit. Times told are exact µs when the script knows now,
-- else counted from the start of the server's ms (up to a ms long, never
-- short). A clock reading earlier than the window counts in the window.
-- A call usually runs INCRBY (the count, optimistically) and PTTL (where
-- in the window the call is): no TIME, the costliest command to read,
-- but when a window starts, which also runs a PEXPIREAT.
--
-- Record: count, the window's count with the call.
-- count: the window's count with the call (the twin's w.count + cost);
-- msLeft: ms until the window ends (the twin's fixedWindow).
local count = redis.call("INCRBY", key, costArg) -- as sent: no number to format
local frac = now % 1000
local nowMs = (now - frac) / 1000
local msLeft = redis.call("PEXPIRETIME", key) - 1000 - nowMs
if count == cost or msLeft <= 0 then
  -- A new window: no count before (count == cost), or the key's last
  -- millisecond, which is the first of the next window.
  local stateEnd = (now - now % period + period) / 1000
  if count == cost then redis.call("PEXPIREAT", key, stateEnd + 1000) else redis.call("SET", key, costArg, "PXAT", stateEnd + 1000) end
  count, msLeft = cost, stateEnd - nowMs
end
res = msLeft * 1000 - frac
if count <= threshold then
  ok, rem = true, threshold - count
else
  redis.call("DECRBY", key, costArg) -- the count was there before: not zero
  rem, ret = threshold - count + cost, res
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
  -- reset fits in 20 bits, unless the key holds the longer state of an
  -- earlier period (see PackBits in script.go).
  if reset < 1048576 then return (remaining * 1048576 + reset) * 64 + 20 end
end
return {1, rem, 0, res, 0, del}
