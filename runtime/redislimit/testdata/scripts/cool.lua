-- cool.lua records that a line cools until now + d: a later end than the
-- one recorded replaces it, a sooner one changes nothing.
--
-- KEYS[1]  the line's cooldown key: the end of its cooldown (µs), which
--          expires a second after it.
-- ARGV[1]  the time in microseconds, or "" to read the server's clock
--          (TIME); ARGV[2] d, in µs (positive, at most an hour).
--
-- Replies the end (µs) the key holds.
local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[1] + 0
end
local e = now + ARGV[2]
local cur = tonumber(redis.call("GET", KEYS[1]))
if cur and cur >= e then return cur end
redis.call("SET", KEYS[1], string.format("%d", e), "PX", string.format("%d", math.ceil((e - now) / 1000) + 1000))
return e