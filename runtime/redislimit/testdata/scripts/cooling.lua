-- cooling.lua tells which of a call's cooling lines cools longest, and how
-- long still.
--
-- KEYS[i]  line i's cooldown key (see cool.lua), all with one hash tag.
-- ARGV[1]  the time in microseconds, or "" to read the server's clock.
--
-- Replies {i, left_us}: the key whose cooldown ends last, and how long it
-- still cools; {0, 0} when none cools now. A value that is not a number
-- (written by something else) counts as no cooldown.
local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
local pick, last = 0, now
for i = 1, #KEYS do
  local e = tonumber(redis.call("GET", KEYS[i]))
  if e and e > last then pick, last = i, e end
end
return {pick, last - now}