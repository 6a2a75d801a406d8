
local now = tonumber(ARGV[2])
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "sliding_log"
local period, threshold, capacity = 1000000, 100, 100
local fmt = string.format

local ok, rem, ret, res, del, x, y, z = false, 0, 0, 0, 0
local failed
repeat -- for the check's break
    local start = now - period
    local head = redis.call("LINDEX", key, "0")
    local refresh, h, marked = not head, nil, false -- a new log: set the TTL
    if head then
      h = tonumber(head)
      if h < 0 then h, marked = -h, true end
    end
    if h and h <= start then
      refresh = marked
      redis.call("LPOP", key)
      head = redis.call("LINDEX", key, "0")
      h = head and math.abs(tonumber(head))
      if not head then refresh = true end
      if h and h <= start then
        refresh = true
        local len = redis.call("LLEN", key)
        local lo, hi = 1, 1
        while hi < len and math.abs(tonumber(redis.call("LINDEX", key, hi))) <= start do
          lo = hi + 1
          hi = hi * 2
        end
        if hi > len then hi = len end
        while lo < hi do
          local mid = math.floor((lo + hi) / 2)
          if math.abs(tonumber(redis.call("LINDEX", key, mid))) <= start then
            lo = mid + 1
          else
            hi = mid
          end
        end
        if lo >= len then
          redis.call("DEL", key)
          head, h = nil, nil
        else
          redis.call("LTRIM", key, lo, "-1")
          head = redis.call("LINDEX", key, "0")
          h = math.abs(tonumber(head))
        end
      end
    end
    local logged = now
    if h and now < h then
      logged = math.max(now, math.abs(tonumber(redis.call("LINDEX", key, "-1"))))
    end
    local s, len = fmt("%d", logged) -- not tostring: %.14g would round it
    if refresh then s = "-" .. s end
    if cost == 1 then
      len = redis.call("RPUSH", key, s)
    else
      local batch, left = {}, cost
      for j = 1, math.min(cost, 1000) do batch[j] = s end
      while left > 0 do
        local k = math.min(left, 1000)
        len = redis.call("RPUSH", key, unpack(batch, 1, k))
        left = left - k
      end
    end
    if len <= threshold then
      ok, rem, res, x, y, z = true, threshold - len, logged + period - now, refresh, logged, len
    else
      ret = math.abs(tonumber(redis.call("LINDEX", key, len - threshold - 1))) + period - now
      if cost == 1 then redis.call("RPOP", key) else redis.call("RPOP", key, cost) end
      local last = redis.call("LINDEX", key, "-1") -- len > threshold >= cost
      local newest = tonumber(last)
      if newest < 0 then
        newest = -newest
      elseif refresh then
        redis.call("LSET", key, "-1", "-" .. last) -- the mark popped with the call
      end
      if refresh then redis.call("PEXPIRE", key, math.ceil((newest + 2 * period - now) / 1000) + 1000) end
      rem, res = threshold - len + cost, newest + period - now
    end
until true
if failed then return failed end
if not ok then
  return {0, rem, ret, res, 0, 0}
end

      if x then redis.call("PEXPIRE", key, math.ceil((y + 2 * period - now) / 1000) + 1000) end
local remaining, reset = rem, res
if del == 0 then
  if reset < 1048576 then return (remaining * 1048576 + reset) * 64 + 20 end
end
return {rem, res, del}

