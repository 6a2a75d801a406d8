-- server_time.lua replies the time of the server that holds KEYS[1], in
-- µs since the Unix epoch (TIME), and changes nothing.
--
-- KEYS[1]  any key: it names the master whose clock is read.
local t = redis.call("TIME")
return t[1] * 1000000 + t[2]
