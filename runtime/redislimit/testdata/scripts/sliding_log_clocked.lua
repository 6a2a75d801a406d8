
local now = tonumber(ARGV[2])
local cost, costArg = 1, "1"
if ARGV[1] then cost, costArg = tonumber(ARGV[1]), ARGV[1] end
local key, algo = KEYS[1], "sliding_log"
local period, threshold, capacity = 1000000, 100, 100
local fmt = string.format

local ok, rem, ret, res, del = false, 0, 0, 0, 0
    local start = now - period
    local head = redis.call("LINDEX", key, "0")
    local refresh, oldest, marked = not head, nil, false -- a new log: set the TTL
    if head then
      oldest = tonumber(head)
      if oldest < 0 then oldest, marked = -oldest, true end
    end
    if oldest and oldest <= start then
      refresh = marked
      redis.call("LPOP", key)
      head = redis.call("LINDEX", key, "0")
      oldest = head and math.abs(tonumber(head))
      if not head then refresh = true end
      if oldest and oldest <= start then
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
          head, oldest = nil, nil
        else
          redis.call("LTRIM", key, lo, "-1")
          head = redis.call("LINDEX", key, "0")
          oldest = math.abs(tonumber(head))
        end
      end
    end
    local logged = now
    if oldest and now < oldest then
      logged = math.max(now, math.abs(tonumber(redis.call("LINDEX", key, "-1"))))
    end
    local entry, len = fmt("%d", logged) -- not tostring: %.14g would round it
    if refresh then entry = "-" .. entry end
    if cost == 1 then
      len = redis.call("RPUSH", key, entry)
    else
      local entries, left = {}, cost
      for j = 1, math.min(cost, 1000) do entries[j] = entry end
      while left > 0 do
        local k = math.min(left, 1000)
        len = redis.call("RPUSH", key, unpack(entries, 1, k))
        left = left - k
      end
    end
    if len <= threshold then
      ok, rem, res = true, threshold - len, logged + period - now
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
if not ok then
  return {0, rem, ret, res, 0, 0}
end

      if refresh then redis.call("PEXPIRE", key, math.ceil((logged + 2 * period - now) / 1000) + 1000) end
local remaining, reset = rem, res
if del == 0 then
  if reset < 1048576 then return (remaining * 1048576 + reset) * 64 + 20 end
end
return {rem, res, del}

