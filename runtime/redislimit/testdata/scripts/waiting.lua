-- waiting.lua counts the places of a queue of waiting calls (see
-- queue.lua), changing nothing: those after the head places whose
-- callers stayed away past their grace, which the next queue script run
-- drops.
--
-- KEYS[1]  the queue's order, KEYS[2] its due times (see queue.lua).
-- ARGV[1]  the time in microseconds, or "" to read the server's clock
--          (TIME); ARGV[2] how long (µs) a place outlives its due time.
--
-- Replies {n, due_us}: how many places count, and how long until the
-- last of them is due (0 when that is past).
local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
local grace = ARGV[2] + 0
local n, last, live = 0, now, false
for _, t in ipairs(redis.call("ZRANGE", KEYS[1], 0, -1)) do
  local due = tonumber(redis.call("HGET", KEYS[2], t))
  live = live or (due and due + grace >= now)
  if live then
    n = n + 1
    if due and due > last then last = due end
  end
end
return {n, last - now}