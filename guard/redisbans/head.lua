-- head.lua returns where the change log stands, read at one instant:
-- {version, ID of the last entry ("0-0" if none), bans in the hash}.
--
-- KEYS[1]  the version
-- KEYS[2]  the change log
-- KEYS[3]  the hash of bans
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local id = '0-0'
if last[1] then
	id = last[1][1]
end
return {redis.call('GET', KEYS[1]) or '0', id, redis.call('HLEN', KEYS[3])}
