-- reserve_slot.lua takes a concurrency slot and decides the call's rate
-- limits, all or nothing: the slot is taken only if the rate limits admit
-- the call, and the rate limits are charged only if a slot is free. Its
-- Go twin is (*MemoryLimiter).ReserveSlot (runtime/memoryslots.go).
--
-- KEYS[1]  the slot key: a sorted set of tokens scored with their lease's
--          end (µs); KEYS[2..] the rate limits' keys (the generic decide
--          script's KEYS), all with the same hash tag.
-- ARGV[1]  slots: how many calls may be in flight; ARGV[2] the lease (µs);
--          ARGV[3] the call's token, or "" to peek: decide as a call
--          would, taking no slot (the decide script's ARGV then say
--          "peek", so it charges nothing).
-- ARGV[4..]  the generic decide script's ARGV: the time ("" reads TIME),
--          the cost, then the rate limits (none: the slot alone).
--
-- Replies {decision, now}: the 6-array of a slot denial (index: the
-- number of rate limits), or the rate limits' decision (any of the decide
-- script's replies), or for a slot alone {1, slots left, 0, 0, 0, 0}; or
-- the decide script's error, such as a calendar skew (calendarSkewCode in
-- script.go), taking no slot. A peek replies {decision, slots held} (the
-- twin's PeekSlot).

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

local function decide_one(KEYS, ARGV)
  -- decide.lua decides one call against one or more limits atomically, in
  -- one script run. MemoryLimiter (package ratelimit, runtime/) is its Go
  -- twin and must make the same decisions: each check names the twin's
  -- function, and the state as the twin names it.
  --
  -- KEYS[i]  the state of limit i; all keys of one call share a hash tag.
  -- ARGV[1]  the time in microseconds, or "" to read the server's clock (TIME).
  -- ARGV[2]  the call's cost in units.
  -- ARGV[3+4(i-1) .. 6+4(i-1)]  limit i: algorithm, period (µs), threshold
  --          (negated when the limit counts calls: the call takes 1 unit of
  --          it, whatever ARGV[2]), capacity (the burst of token_bucket and
  --          gcra, the queue bound of leaky_bucket, else the threshold).
  -- ARGV[3+4n]  "peek" to charge no limit even when all admit (Peek): an
  --          admitting check is rolled back as when another limit denies;
  --          or a hold, in µs (a reservation of guard.HeldReserver): the
  --          call's sliding_log entries count that much longer (see check
  --          sliding_log).
  -- ARGV[4+4n ...]  the bounds of calendar periods, four per fixed_window
  --          limit that has one (its period is -j, j the index of its
  --          first; see check fixed_window).
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

  local now
  if ARGV[1] == "" then
    local t = redis.call("TIME")
    now = t[1] * 1000000 + t[2]
  else
    now = ARGV[1] + 0
  end
  local callCost, callCostArg = ARGV[2] + 0, ARGV[2]
  local n = #KEYS
  local hold, mode = 0, ARGV[3 + 4 * n]
  if mode and mode ~= "" and mode ~= "peek" then hold = mode + 0 end

  -- Check every limit. ok, rem, ret, res, del: whether the limit admits the
  -- call, its remaining, retry, reset and delay (a Decision's Remaining,
  -- RetryAfter, ResetAfter and Delay, in µs). rec1, rec2, rec3: the record
  -- of an admitting check, what its commit or rollback needs (each
  -- algorithm's block names them); kept in undo when there are several limits.
  local allowed, pick, remaining, retry, reset, delay = true, 1, 0, -1, 0, 0
  local failed, undo, rec1, rec2, rec3
  if n > 1 then undo = {} end
  for i = 1, n do
    local key, algo = KEYS[i], ARGV[4 * i - 1]
    local period, threshold, capacity = ARGV[4 * i] + 0, ARGV[4 * i + 1] + 0, ARGV[4 * i + 2] + 0
    local cost, costArg = callCost, callCostArg
    if threshold < 0 then threshold, cost, costArg = -threshold, 1, "1" end -- the limit counts calls
    local ok, rem, ret, res, del = false, 0, 0, 0, 0
    rec1, rec2, rec3 = nil, nil, nil

    if algo == "sliding_log" then
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
      local head = redis.pcall("LINDEX", key, "0")
      if type(head) == "table" then failed = head break end
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
      if hold > 0 then refresh = true end -- see "held sliding_log"
      if refresh then entry = "-" .. entry end
      if cost > 1 then entry = entry .. ":" .. costArg end
      if hold > 0 then entry = entry .. string.format(":%d", hold) end
      local units = redis.call("RPUSH", key, entry) - h + x + cost - 1
      if units <= threshold then
        ok, rem, res = true, threshold - units, logged + period - now
        if cost > 1 then
          local more = cost - 1
          if hold > 0 then held = true end
          if h == 1 then
            redis.call("LSET", key, "0", string.format(held and "!%d" or "#%d", x + more))
          else
            redis.call("LPUSH", key, string.format(held and "!%d" or "#%d", more))
          end
        end
        if refresh then refresh = held and 2.5 or 2 end -- the TTL's span, in periods
        rec1, rec2, rec3 = refresh, logged, units
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
    elseif algo == "fixed_window" then
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
      --
      -- A calendar period (period < 0, only in this script): its windows are
      -- given, as Lua knows no time zones: ARGV[-period] to ARGV[3 - period]
      -- are the starts of four windows in a row, in µs (the twin's
      -- limitfacts.Calendar.Bounds, around the client's clock), and the call
      -- counts in the one that holds now: the window ends at ends. A time
      -- outside them (a client clock off by more than a window) fails the call
      -- before any command, with the time, for the client to send bounds
      -- around it (calendarSkewCode in script.go).
      local ends
      if period < 0 then
        local b = -period
        if now < ARGV[b] + 0 or now >= ARGV[b + 3] + 0 then
          failed = {err = string.format("CALENDARSKEW %d", now)}
          break
        end
        ends = ARGV[b + 3] + 0
        if now < ARGV[b + 2] + 0 then ends = ARGV[b + 2] + 0 end
        if now < ARGV[b + 1] + 0 then ends = ARGV[b + 1] + 0 end
      end
      -- count: the window's count with the call (the twin's w.count + cost);
      -- msLeft: ms until the window ends (the twin's fixedWindow).
      local count = redis.pcall("INCRBY", key, costArg) -- as sent: no number to format
      if type(count) == "table" then failed = count break end
      local frac = now % 1000
      local nowMs = (now - frac) / 1000
      local msLeft = redis.call("PEXPIRETIME", key) - 1000 - nowMs
      if count == cost or msLeft <= 0 then
        -- A new window: no count before (count == cost), or the key's last
        -- millisecond, which is the first of the next window.
        local stateEnd = (ends or now - now % period + period) / 1000
        if count == cost then redis.call("PEXPIREAT", key, stateEnd + 1000) else redis.call("SET", key, costArg, "PXAT", stateEnd + 1000) end
        count, msLeft = cost, stateEnd - nowMs
      end
      res = msLeft * 1000 - frac
      if count <= threshold then
        ok, rem = true, threshold - count
        rec1 = count
      else
        redis.call("DECRBY", key, costArg) -- the count was there before: not zero
        rem, ret = threshold - count + cost, res
      end
    elseif algo == "sliding_window" then
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
      local packed = redis.pcall("INCRBY", key, costArg) -- as sent: no number to format
      if type(packed) == "table" then failed = packed break end
      local frac = now % 1000
      local nowMs = (now - frac) / 1000
      local msLeft = redis.call("PEXPIRETIME", key) - 1000 - nowMs
      local periodMs = period / 1000
      local cur = packed % 134217728 - cost
      local prev = (packed - cur - cost) / 134217728
      if packed == cost or msLeft <= 0 then
        -- A new window with none before: no counts, or the key's last
        -- millisecond, which is the first of the window after next.
        local stateEnd = (now - now % period + 2 * period) / 1000
        if packed == cost then redis.call("PEXPIREAT", key, stateEnd + 1000) else redis.call("SET", key, costArg, "PXAT", stateEnd + 1000) end
        packed, cur, prev, msLeft = cost, 0, 0, stateEnd - nowMs
      elseif msLeft <= periodMs then
        -- The next window (once per window): cur becomes prev.
        packed, cur, prev = cur * 134217728 + cost, 0, cur
        redis.call("SET", key, packed, "PXAT", nowMs + msLeft + periodMs + 1000)
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
        rec1 = packed
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
    else -- token_bucket, leaky_bucket, gcra
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
      local stored = redis.pcall("GET", key)
      if type(stored) == "table" then failed = stored break end
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
      local increment, incrementFrac, burstOffset, burstOffsetFrac = 0, 0, 0, 0
      if cost * period < BIG then incrementFrac = cost * period % threshold; increment = (cost * period - incrementFrac) / threshold else increment, incrementFrac = muldiv(cost, period, threshold) end
      if capacity * period < BIG then burstOffsetFrac = capacity * period % threshold; burstOffset = (capacity * period - burstOffsetFrac) / threshold else burstOffset, burstOffsetFrac = muldiv(capacity, period, threshold) end
      -- newTat: the TAT with the call (the twin's addInterval).
      local newTat, newTatFrac = tat + increment, tatFrac + incrementFrac
      if newTatFrac >= threshold then newTat, newTatFrac = newTat + 1, newTatFrac - threshold end
      local room, roomFrac -- the burst offset left unused
      if newTat - now < burstOffset or (newTat - now == burstOffset and newTatFrac <= burstOffsetFrac) then
        ok, res = true, newTat - now
        rec1, rec2, rec3 = newTat, newTatFrac, oldTat
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
    end

    if ok then
      if undo then undo[i] = {rec1, rec2, rec3} end
      if allowed and (i == 1 or rem < remaining) then
        pick, remaining, reset = i, rem, res
      end
      if del > delay then delay = del end
    elseif allowed or ret > retry then
      allowed, pick, remaining, retry, reset = false, i, rem, ret, res
    end
  end

  -- Commit every limit, or roll back those that admitted the call.
  local commit = allowed and not failed and ARGV[3 + 4 * n] ~= "peek"
  for i = 1, n do
    if undo then
      local u = undo[i]
      if u then rec1, rec2, rec3 = u[1], u[2], u[3] else rec1 = nil end
    end
    local key, algo, period = KEYS[i], ARGV[4 * i - 1], ARGV[4 * i] + 0
    local cost, costArg = callCost, callCostArg
    if ARGV[4 * i + 1] + 0 < 0 then cost, costArg = 1, "1" end
    if rec1 == nil then
      -- limit i did not admit the call (or was not checked): nothing to do
    elseif commit then
      if algo == "sliding_log" then
        local refresh, logged, units = rec1, rec2, rec3
        -- Commit sliding_log (the twin's (*logState).charge): the entry is
        -- pushed; set the TTL if this call marked it (refresh: the TTL's span).
        if refresh then redis.call("PEXPIRE", key, math.ceil((logged + refresh * period - now) / 1000) + 1000) end
      elseif algo == "token_bucket" or algo == "leaky_bucket" or algo == "gcra" then
        local newTat, newTatFrac, oldTat = rec1, rec2, rec3
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
      end
    else
      if algo == "sliding_log" then
        local refresh, logged, units = rec1, rec2, rec3
        -- Roll back sliding_log: pop the call's entry, take its weight off the
        -- count, and if it was marked, mark the newest entry left in its place
        -- (see "check sliding_log").
        redis.call("RPOP", key)
        if cost > 1 then
          local head = redis.call("LINDEX", key, "0")
          local x, gone, held = string.sub(head, 2) + 0, cost - 1, string.byte(head) == 33
          if gone > 0 then
            if x == gone then
              redis.call("LPOP", key)
            else
              redis.call("LSET", key, "0", string.format(held and "!%d" or "#%d", x - gone))
            end
          end
        end
        if units > cost and refresh then
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
      elseif algo == "fixed_window" or algo == "sliding_window" then
        local value = rec1
        -- Roll back a window: take the cost off its count, deleting a key it
        -- would leave at zero.
        if value == cost then
          redis.call("DEL", key)
        else
          redis.call("DECRBY", key, costArg) -- as sent: no number to format
        end
      end
    end
  end
  if failed then return failed end
  if not allowed then
    return {0, remaining, retry, reset, pick - 1, 0}
  end
  if n == 1 and delay == 0 then
    -- An admitted call of one limit with no delay, whose numbers fit, gets
    -- its decision packed in one integer, (remaining * 2^s + reset_after_us)
    -- * packSlot + s with packSlot = 64 (2^6), where reset_after_us < 2^s:
    -- the array costs both ends more.
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
end

local slots, lease, token = ARGV[1] + 0, ARGV[2] + 0, ARGV[3]
local keys, argv = {}, {}
for j = 2, #KEYS do keys[j - 1] = KEYS[j] end
for j = 4, #ARGV do argv[j - 3] = ARGV[j] end
if argv[1] == "" then
  local t = redis.call("TIME")
  argv[1] = t[1] * 1000000 + t[2]
end
local now = argv[1] + 0
local slot = KEYS[1]
-- Drop the slots whose lease ended (the twin's live).
redis.call("ZREMRANGEBYSCORE", slot, "-inf", string.format("%d", now))
local held = redis.call("ZCARD", slot)
local second = now -- of the reply; a peek's is the slots held
if token == "" then second = held end
if held >= slots then
  local soonest = redis.call("ZRANGE", slot, 0, 0, "WITHSCORES")
  local last = redis.call("ZRANGE", slot, -1, -1, "WITHSCORES")
  return {{0, 0, soonest[2] - now, last[2] - now, #keys, 0}, second}
end
local reply = {1, slots - held - 1, 0, 0, 0, 0}
if #keys > 0 then
  reply = decide_one(keys, argv)
  -- A failed call (a calendar skew, WRONGTYPE) is the script's error: no
  -- slot taken.
  if type(reply) == "table" and reply.err then return reply end
  if type(reply) == "table" and #reply == 6 and reply[1] == 0 then
    return {reply, second} -- denied by a rate limit: no slot taken
  end
end
if token == "" then
  return {reply, second} -- a peek takes no slot
end
-- Take a slot: the token, scored with its lease's end.
redis.call("ZADD", slot, string.format("%d", now + lease), token)

-- The key outlives every lease it holds by a second (keepMs).
local want = math.ceil(lease / 1000) + 1000
if redis.call("PTTL", slot) < want then redis.call("PEXPIRE", slot, want) end
return {reply, now}